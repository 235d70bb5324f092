// bytes_text.c: byte counts as text (bytes_text.h).
#include "core/bytes_text.h"

#include <stdio.h>

mt_bytes_text mt_bytes_format(size_t bytes) {
    mt_bytes_text t;
    double b = (double)bytes;
    if (bytes < 1024) snprintf(t.s, sizeof t.s, "%zu bytes", bytes);
    else if (bytes < (size_t)1 << 20) snprintf(t.s, sizeof t.s, "%.1f KiB", b / 1024.0);
    else if (bytes < (size_t)1 << 30) snprintf(t.s, sizeof t.s, "%.1f MiB", b / 1048576.0);
    else snprintf(t.s, sizeof t.s, "%.2f GiB", b / 1073741824.0);
    return t;
}
