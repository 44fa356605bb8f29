/*
 * interpose_thread -- pthread_create: the application's threads, counted
 * (start.h: its last one to end stops tdax's write-back thread first), and
 * the look for a Go library whose runtime starts its first thread here
 * (interpose_go.c).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "preload/interpose.h"
#include "preload/start.h"
#include "preload/state.h"

/* An application's thread starts: counted (start.h), then its routine. */
struct app_thread {
	void *(*fn)(void *);
	void *arg;
};

static void *app_thread_runs(void *p)
{
	struct app_thread start = *(struct app_thread *)p;
	free(p);
	tdax_app_thread_started();
	return start.fn(start.arg);
}

EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	tdax_go_thread_made_by((uintptr_t)__builtin_return_address(0));
	bool counted = tdax_app_thread_coming();
	struct app_thread *start = counted ? malloc(sizeof(*start)) : NULL;
	if (!start) {
		if (counted) /* (no memory: a thread not counted, start.h) */
			tdax_app_thread_not_made();
		return TDAX_REAL(pthread_create)(t, attr, fn, arg);
	}
	*start = (struct app_thread){ fn, arg };
	int r = TDAX_REAL(pthread_create)(t, attr, app_thread_runs, start);
	if (r != 0) {
		free(start);
		tdax_app_thread_not_made();
	}
	return r;
}

