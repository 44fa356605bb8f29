/*
 * tdax-rocksdb-client -- the RocksDB workload of the crash suite.
 *
 *   tdax-rocksdb-client DB ORACLE
 *
 * Puts key k<i> = value v<i> repeated (1 + i % 20) times, i = 1, 2, ...,
 * each with sync=true (the WAL is written and synced before the put
 * returns), through librocksdb's C API; after each put returns it appends
 * "i" to ORACLE. Runs until killed. It never flushes the memtable itself:
 * a flush makes everything before it durable in an SST file through real
 * syncs, and a cut right after one would let a lying sync (the positive
 * control) lose nothing.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Noreturn void die(const char *what, char *err)
{
	fprintf(stderr, "tdax-rocksdb-client: %s: %s\n", what, err ? err : "failed");
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: tdax-rocksdb-client DB ORACLE\n");
		return 2;
	}
	char *err = NULL;
	rocksdb_options_t *opt = rocksdb_options_create();
	rocksdb_options_set_create_if_missing(opt, 1);
	rocksdb_t *db = rocksdb_open(opt, argv[1], &err);
	if (err)
		die(argv[1], err);
	/* Made empty by crashtest.py, opened without O_CREAT: see workloads.py, open_oracle. */
	int oracle = open(argv[2], O_WRONLY | O_APPEND);
	if (oracle < 0)
		die(argv[2], NULL);
	rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
	rocksdb_writeoptions_set_sync(wo, 1);
	char key[32], line[32], unit[32], val[32 * 20];
	for (unsigned long i = 1;; i++) {
		int kl = snprintf(key, sizeof(key), "k%lu", i);
		int one = snprintf(unit, sizeof(unit), "v%lu", i);
		size_t vl = 0;
		for (unsigned long r = 0; r < 1 + i % 20; r++, vl += (size_t)one)
			memcpy(val + vl, unit, (size_t)one);
		rocksdb_put(db, wo, key, (size_t)kl, val, vl, &err);
		if (err)
			die("put", err);
		int ll = snprintf(line, sizeof(line), "%lu\n", i);
		if (write(oracle, line, (size_t)ll) != ll)
			die(argv[2], NULL);
	}
}
