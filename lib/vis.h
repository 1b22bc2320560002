/*
 * Names are data: escape an outside string (a host, zone, model, comm or container
 * name from the bus, a kubelet, a BMC or a file) where it is printed, in the style of
 * OpenBSD's vis(3), so that no control character or escape sequence reaches a
 * terminal, a log line or a script.
 */
#ifndef WB_VIS_H
#define WB_VIS_H

#include <stddef.h>

/* Also escape '"' as \" (for a double-quoted context). */
#define WB_VIS_DQ 1u

/*
 * Write the n bytes at src into dst (size bytes, always NUL-terminated when size > 0)
 * with valid UTF-8 kept as it is and everything else made visible: \n \r \t and \\
 * as in C; other C0 controls, DEL, C1 controls (U+0080..U+009F), the bidirectional
 * and line separator controls (U+2028..U+202E, U+2066..U+2069) and bytes that are
 * not valid UTF-8 as \xNN per byte. An escape is never cut in half. Returns the
 * length the whole result needs (as snprintf), so a result >= size was cut.
 */
size_t wb_vis(char *dst, size_t size, const char *src, size_t n, unsigned flags);

/* Whether the n bytes at s print as they are (wb_vis would change nothing). */
int wb_vis_clean(const char *s, size_t n);

/* wb_vis of a NUL-terminated string into buf; returns buf, for a printf argument. */
const char *wb_vis_str(char *buf, size_t size, const char *s);

/* Room for an escaped name of up to 511 bytes (4 bytes out for each byte in). */
#define WB_VIS_MAX 2048
/* An escaped copy of s that lives until the end of the enclosing block: printf("%s", WB_VIS(s)). */
#define WB_VIS(s) wb_vis_str((char[WB_VIS_MAX]){""}, WB_VIS_MAX, (s))

#endif
