# Turns a file into a C array (the embedded default corpus): cmake -DIN= -DOUT= -P
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR n "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE ${OUT} "// Generated from ${IN} by embed_file.cmake; do not edit.\n#include <stddef.h>\nconst unsigned char mt_corpus_kjv[] = {${body}0};\nconst size_t mt_corpus_kjv_len = ${n};\n")
