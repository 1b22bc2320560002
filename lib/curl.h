/*
 * libcurl's functions, loaded at run time by lib/httpc.c (dl.h) so that a daemon without an
 * HTTP peer maps neither it nor what it brings: one table for every HTTP client of the project.
 */
#ifndef WB_CURL_H
#define WB_CURL_H

#include <stddef.h>

#include <curl/curl.h>

struct wb_curl {
	__typeof__(curl_global_init) *global_init;
	__typeof__(curl_easy_init) *easy_init;
	__typeof__(curl_easy_setopt) *easy_setopt;
	__typeof__(curl_easy_perform) *easy_perform;
	__typeof__(curl_easy_getinfo) *easy_getinfo;
	__typeof__(curl_easy_cleanup) *easy_cleanup;
	__typeof__(curl_easy_strerror) *easy_strerror;
	__typeof__(curl_slist_append) *slist_append;
	__typeof__(curl_slist_free_all) *slist_free_all;
	__typeof__(curl_multi_init) *multi_init;
	__typeof__(curl_multi_add_handle) *multi_add_handle;
	__typeof__(curl_multi_remove_handle) *multi_remove_handle;
	__typeof__(curl_multi_perform) *multi_perform;
	__typeof__(curl_multi_poll) *multi_poll;
	__typeof__(curl_multi_info_read) *multi_info_read;
	__typeof__(curl_multi_cleanup) *multi_cleanup;
	__typeof__(curl_url) *url;
	__typeof__(curl_url_set) *url_set;
	__typeof__(curl_url_get) *url_get;
	__typeof__(curl_url_cleanup) *url_cleanup;
	__typeof__(curl_free) *free;
};

/* libcurl, loaded and initialised once per process, or NULL with err saying why (the library's
 * name and the package to install). */
const struct wb_curl *wb_curl_load(char *err, size_t errlen);

#endif
