/* node_suite.h — what the tests that drive `gepard serve` with an official
 * Node client (OpenAI's, Cartesia's) share: a visible skip without node or
 * the pinned npm package, and running a suite script that prints one JSON
 * line per check ({"check", "ok", "info"}) against a running server. */
#ifndef GEPARD_TEST_NODE_SUITE_H
#define GEPARD_TEST_NODE_SUITE_H

#include <cjson/cJSON.h>

#include "server_harness.h"

/* Skip the test unless node runs and `modules`/`package`/package.json
 * exists; `what` names the client in the notes, `npm_dir` the folder
 * `npm install --prefix` fills. */
void test_require_node_package(const char *modules, const char *package, const char *what,
                               const char *npm_dir);
/* Run `node SCRIPT BASE_URL KEY OUT_DIR` (OUT_DIR: the test's temporary
 * directory) for up to 240 s; every check is a note and must be ok, node
 * must exit 0 and report `expected` checks. */
void test_node_suite(const char *script, const test_server *ts, const char *key, const char *what,
                     int expected);

/* The suite's manifest.json in the test's temporary directory (the caller
 * frees it), or NULL after failing the test. */
cJSON *test_node_manifest(void);
/* Seconds of audio libsndfile decodes from `path` (counted, as a streamed
 * WAV's header has no length), its rate and channels; -1 if it does not
 * open. */
double test_sndfile_seconds(const char *path, int *rate, int *channels);
/* Decode every body the suite saved in `dir` (its manifest.json: file, rate,
 * seconds, lossy, bit_rate, bytes): its rate, its length (lossless within
 * one codec frame, lossy within 0.1 s for the encoder's delay and padding)
 * and a lossy file's size against its bit rate; `expected_files` of them. */
void test_node_check_manifest(const char *dir, int expected_files);

#endif
