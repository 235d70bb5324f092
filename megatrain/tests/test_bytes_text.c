// test_bytes_text: byte counts in the unit their size calls for (core/bytes_text.h), so that a
// tiny run's memory refusal shows its figures instead of "0.00 GiB".
#include <string.h>

#include "core/bytes_text.h"
#include "test_util.h"

static void is(size_t bytes, const char *want) {
    const char *got = mt_bytes_format(bytes).s;
    CHECK(!strcmp(got, want), "%zu bytes: \"%s\", expected \"%s\"", bytes, got, want);
}

int main(void) {
    is(0, "0 bytes");
    is(1000, "1000 bytes");
    is(1023, "1023 bytes");
    is(1024, "1.0 KiB");
    is(100000, "97.7 KiB");
    is((size_t)1 << 20, "1.0 MiB");
    is(3460000, "3.3 MiB");
    is(((size_t)1 << 30) - 1, "1024.0 MiB"); // a hair under 1 GiB stays MiB, rounded
    is((size_t)1 << 30, "1.00 GiB");
    is((size_t)4660000000, "4.34 GiB");
    is((size_t)1500 << 30, "1500.00 GiB"); // GiB at the top: the paper's 1.5 TB hosts read as GiB
    return mt_test_finish("test_bytes_text");
}
