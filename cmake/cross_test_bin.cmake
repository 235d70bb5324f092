# Tests find the project's programs through MT_BIN (shell tests, and C tests that
# run the CLI). In a cross build (cmake/aarch64-linux-gnu.cmake) those programs cannot
# run directly, so MT_TEST_BIN is a directory of one-line wrappers that start each
# through CMAKE_CROSSCOMPILING_EMULATOR (qemu-user); natively it is bin/ itself.
# Include before the subdirectories (they read MT_TEST_BIN), and call
# mt_cross_test_wrappers() after them.
# MT_TEST_TIMEOUT: each test's limit in seconds, four times longer under emulation
# (qemu-user runs this code 30-100x slower than the host).
set(MT_TEST_BIN ${CMAKE_BINARY_DIR}/bin)
set(MT_TEST_TIMEOUT 900)
if(CMAKE_CROSSCOMPILING AND CMAKE_CROSSCOMPILING_EMULATOR)
  set(MT_TEST_BIN ${CMAKE_BINARY_DIR}/emu-bin)
  set(MT_TEST_TIMEOUT 3600)
endif()

function(mt_cross_test_wrappers)
  if(MT_TEST_BIN STREQUAL "${CMAKE_BINARY_DIR}/bin")
    return()
  endif()
  list(JOIN CMAKE_CROSSCOMPILING_EMULATOR "\" \"" emu)
  set(dirs ${CMAKE_SOURCE_DIR})
  get_property(subdirs DIRECTORY ${CMAKE_SOURCE_DIR} PROPERTY SUBDIRECTORIES)
  list(APPEND dirs ${subdirs})
  foreach(dir ${dirs})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        file(GENERATE OUTPUT ${MT_TEST_BIN}/$<TARGET_FILE_NAME:${t}>
             CONTENT "#!/bin/sh\nexec \"${emu}\" \"$<TARGET_FILE:${t}>\" \"$@\"\n"
             FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
      endif()
    endforeach()
  endforeach()
endfunction()
