// bytes_text.h: a byte count in the binary unit its size calls for, so that a message about a
// tiny run says "96.0 KiB", not "0.00 GiB", and one about a large run still says GiB.
#ifndef MT_BYTES_TEXT_H
#define MT_BYTES_TEXT_H

#include <stddef.h>

typedef struct {
    char s[32];
} mt_bytes_text;

// "512 bytes", "1.5 KiB", "96.0 MiB", "4.34 GiB" (bytes under 1 KiB, then the largest unit up to
// GiB that is at least 1). By value: mt_bytes_format(n).s lives to the end of the full expression.
mt_bytes_text mt_bytes_format(size_t bytes);

#endif
