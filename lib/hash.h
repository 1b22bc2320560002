/* The one hash mixer of the stages' tables. */
#ifndef WB_HASH_H
#define WB_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A 64-bit mixer (splitmix64's finaliser): every input bit reaches every output bit. */
static inline uint64_t wb_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* Two keys into one hash (a process: pid and start time). */
static inline uint64_t wb_hash2(uint64_t a, uint64_t b)
{
	return wb_mix64(a * 0x9e3779b97f4a7c15ull ^ b);
}

/*
 * h and n bytes into one running hash, 8 bytes at a time, the length first
 * (so that "ab","c" and "a","bc" differ): a fingerprint held in memory and
 * compared for equality (exportd's label sets), not spread over a table, so
 * one multiply a word does; not for ids that travel (wb_hash_str's).
 */
static inline uint64_t wb_hash_more(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t w;
	h = ((h << 5 | h >> 59) ^ n) * 0x9e3779b97f4a7c15ull;
	for (; n >= 8; n -= 8, s += 8) {
		memcpy(&w, s, 8);
		h = ((h << 5 | h >> 59) ^ w) * 0x9e3779b97f4a7c15ull;
	}
	if (n) {
		w = 0;
		memcpy(&w, s, n);
		h = ((h << 5 | h >> 59) ^ w) * 0x9e3779b97f4a7c15ull;
	}
	return h;
}

/* FNV-1a of a NUL-terminated string: a name's 64-bit id (an executable's path). */
static inline uint64_t wb_hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

#endif
