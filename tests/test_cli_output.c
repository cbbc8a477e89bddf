/* test_cli_output.c — output that cannot be written is an error, never a
 * silent exit 0: every command and output format, written to a full device
 * (our own /dev/full node, so the system's is never at risk) and to a full
 * file system (a 64 KiB tmpfs in a private mount namespace, skipped where
 * that cannot be made). Each failure must exit 1 with the path and the OS
 * reason, and leave no partial file at the target (an existing file keeps
 * its old contents). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "io/audio_file.h"
#include "io/file.h"
#include "test.h"

#define M_TINY test_fixture("model-tiny/model")
#define C_TINY test_fixture("codec-tiny/nano-tiny.nemo")
#define ENOSPC_TEXT "No space left on device"

/* A character device like /dev/full (major 1, minor 7) in the test's own
 * directory. Before the fix, an output to /dev/full went to a temporary in
 * /dev that was renamed over the device (exit 0); with our own node only it
 * is replaced. Falls back to /dev/full if mknod is not allowed. */
static const char *full_device(const char *name) {
    const char *path = test_tmp(name);
    if (mknod(path, S_IFCHR | 0666, makedev(1, 7)) == 0) return path;
    test_note("mknod %s: %s; using /dev/full", path, strerror(errno));
    return "/dev/full";
}

static bool is_char_device(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

/* Expect exit 1 and "PATH...No space left on device" on stderr. */
static void check_enospc(const test_cmd_result *r, const char *what, const char *path) {
    CHECK_MSG(r->status == 1, "%s: exit status %d, want 1; stderr: %s", what, r->status,
              r->err ? r->err : "");
    CHECK_MSG(r->err && strstr(r->err, path) && strstr(r->err, ENOSPC_TEXT),
              "%s: stderr lacks \"%s\" and the reason: %s", what, path, r->err ? r->err : "");
}

static void say_to(const char *path, const char *format, const char *frames, test_cmd_result *r) {
    const char *args[] = {
        "say", "--model", M_TINY, "--codec",  C_TINY, "--max-frames", frames, "--stop-threshold",
        "2",   "--top-k", "1",    "--format", format, "-o",           path,   "Hello world!",
        NULL};
    if (test_run_gepard(r, NULL, 0, 120, args) != 0) memset(r, 0, sizeof *r);
}

TEST(cli_say_to_a_full_device_exits_1_in_every_format) {
    const char *formats[] = {"wav", "wav-float", "mp3", "flac", "opus", "pcm", "f32"};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        /* 20 frames fill stdio's buffer mid-stream; 1 frame fails only at the final flush */
        const char *lengths[] = {"20", "1"};
        for (int k = 0; k < 2; k++) {
            char name[64];
            snprintf(name, sizeof name, "full-%s-%s", formats[i], lengths[k]);
            const char *dev = full_device(name);
            test_cmd_result r;
            say_to(dev, formats[i], lengths[k], &r);
            char what[96];
            snprintf(what, sizeof what, "say --format %s, %s frames", formats[i], lengths[k]);
            check_enospc(&r, what, dev);
            CHECK_MSG(is_char_device(dev), "%s: %s is no longer a device", what, dev);
            test_cmd_result_free(&r);
        }
    }
}

/* Run `gepard ARGS > DEVICE` through the shell (stdout to the full device). */
static void run_to_stdout_device(const char *args, const char *dev, test_cmd_result *r) {
    const char *bin = getenv("GEPARD_BIN");
    if (!bin || !*bin) bin = "build/asan/gepard";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "exec '%s' %s > '%s'", bin, args, dev);
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    if (test_run_program(r, NULL, 0, 120, argv) != 0) memset(r, 0, sizeof *r);
}

TEST(cli_every_command_reports_a_full_device) {
    gp_error err;
    /* inputs: a second of a tone at the codec's rate, and codes to decode */
    float tone[22050];
    for (int i = 0; i < 22050; i++) tone[i] = 0.3f * (float)((i / 50) % 2 ? 1 : -1);
    const char *wav = test_tmp("tone.wav"), *codes = test_tmp("codes.json");
    REQUIRE_OK(gp_audio_write_wav(wav, tone, 22050, 1, 22050, false, &err), &err);
    const char *gen[] = {"codes", "--model", M_TINY, "--max-frames", "3", "--stop-threshold",
                         "2",     "--seed",  "1",    "Hi",           NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 120, gen) == 0 && r.status == 0);
    REQUIRE(test_write_file(codes, r.out, r.out_len) == 0);
    test_cmd_result_free(&r);
    /* files named on the command line */
    struct {
        const char *what, *node;
        const char *args[16];
    } cases[] = {
        {"decode -o .wav", "full.wav", {"decode", "--codec", C_TINY, "--codes", codes, "-o"}},
        {"decode -o .f32", "full.f32", {"decode", "--codec", C_TINY, "--codes", codes, "-o"}},
        {"encode -o", "full.json", {"encode", "--codec", C_TINY, "-i", wav, "-o"}},
        {"say --save-voice",
         "full.voice.safetensors",
         {"say", "--model", M_TINY, "--codec", C_TINY, "--max-frames", "1", "--stop-threshold", "2",
          "--voice", wav, "-o", test_tmp("spoken.wav"), "--save-voice"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *dev = full_device(cases[i].node);
        const char *args[20];
        size_t n = 0;
        while (cases[i].args[n]) {
            args[n] = cases[i].args[n];
            n++;
        }
        args[n++] = dev;
        if (strcmp(cases[i].args[0], "say") == 0) args[n++] = "Hi";
        args[n] = NULL;
        REQUIRE(test_run_gepard(&r, NULL, 0, 120, args) == 0);
        check_enospc(&r, cases[i].what, dev);
        CHECK_MSG(is_char_device(dev), "%s: %s is no longer a device", cases[i].what, dev);
        test_cmd_result_free(&r);
    }
    /* standard output */
    char quoted[2048];
    const char *dev = full_device("full-stdout");
    const char *stdout_cases[] = {"--version", "tokenize --model '%s' 'Hello world'",
                                  "codes --model '%s' --max-frames 2 --stop-threshold 2 Hi",
                                  "info '%s/model.safetensors'"};
    for (size_t i = 0; i < sizeof stdout_cases / sizeof stdout_cases[0]; i++) {
        snprintf(quoted, sizeof quoted, stdout_cases[i], M_TINY);
        run_to_stdout_device(quoted, dev, &r);
        CHECK_MSG(r.status == 1 && r.err && strstr(r.err, "standard output") &&
                      strstr(r.err, ENOSPC_TEXT),
                  "gepard %s > full: exit %d, stderr: %s", quoted, r.status, r.err ? r.err : "");
        test_cmd_result_free(&r);
    }
}

/* A 64 KiB tmpfs at `dir`, visible only to this test process and the
 * commands it runs. Returns false (after a note) where it cannot be made. */
static bool mount_tiny_tmpfs(const char *dir) {
    if (mkdir(dir, 0755) != 0) return false;
    if (unshare(CLONE_NEWNS) != 0) {
        test_note("SKIPPED: cannot make a private mount namespace: %s", strerror(errno));
        return false;
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", dir, "tmpfs", 0, "size=64k") != 0) {
        test_note("SKIPPED: cannot mount a 64 KiB tmpfs: %s", strerror(errno));
        return false;
    }
    return true;
}

static size_t count_entries(const char *dir) {
    test_cmd_result r;
    const char *argv[] = {"ls", "-A", dir, NULL};
    size_t n = 0;
    if (test_run_program(&r, NULL, 0, 10, argv) == 0 && r.out)
        for (const char *p = r.out; *p; p++) n += *p == '\n';
    test_cmd_result_free(&r);
    return n;
}

TEST(cli_output_to_a_full_file_system_leaves_no_partial_file) {
    const char *dir = test_tmp("tiny-fs");
    if (!mount_tiny_tmpfs(dir)) return;
    /* 400 frames: 800 KiB of 16-bit audio, ~150 KiB of MP3; more than the 64 KiB */
    const char *formats[] = {"wav", "mp3", "flac", "opus", "pcm"};
    static const char old[] = "the previous contents";
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/out.%s", dir, formats[i]);
        REQUIRE(test_write_file(path, old, sizeof old - 1) == 0);
        test_cmd_result r;
        say_to(path, formats[i], "400", &r);
        check_enospc(&r, formats[i], path);
        test_cmd_result_free(&r);
        char *data = NULL;
        size_t len = 0;
        gp_error err;
        CHECK_MSG(gp_read_file(path, 0, &data, &len, &err) == 0 && len == sizeof old - 1 &&
                      memcmp(data, old, len) == 0,
                  "%s: the existing file was changed (%zu bytes)", formats[i], len);
        free(data);
        CHECK_MSG(count_entries(dir) == i + 1, "%s: a temporary was left behind", formats[i]);
    }
    /* a new file: nothing at all is left */
    char path[1024];
    snprintf(path, sizeof path, "%s/new.wav", dir);
    test_cmd_result r;
    say_to(path, "wav", "400", &r);
    check_enospc(&r, "new wav", path);
    test_cmd_result_free(&r);
    CHECK(!gp_path_exists(path));
    /* a synthetic checkpoint does not fit either */
    snprintf(path, sizeof path, "%s/ckpt", dir);
    const char *synth[] = {"synth", "--preset", "tiny", "--out", path, NULL};
    REQUIRE(test_run_gepard(&r, NULL, 0, 120, synth) == 0);
    CHECK_MSG(r.status == 1 && r.err && strstr(r.err, ENOSPC_TEXT), "synth: exit %d, %s", r.status,
              r.err ? r.err : "");
    test_cmd_result_free(&r);
    CHECK_EQ_INT(count_entries(dir), sizeof formats / sizeof formats[0] + 1); /* + ckpt/ */
}

/* gp_atomic_file follows a symbolic link: the file it points to is replaced
 * and the link stays a link. */
TEST(atomic_file_replaces_the_target_of_a_link) {
    const char *real = test_tmp("real.txt"), *link = test_tmp("link.txt");
    REQUIRE(test_write_file(real, "old", 3) == 0);
    REQUIRE(symlink(real, link) == 0);
    gp_atomic_file af;
    gp_error err;
    REQUIRE_OK(gp_atomic_file_open(&af, link, &err), &err);
    CHECK(af.seekable);
    CHECK_EQ_INT(gp_atomic_file_write(&af, "new!", 4), 0);
    REQUIRE_OK(gp_atomic_file_commit(&af, &err), &err);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    char *data = NULL;
    size_t len = 0;
    REQUIRE_OK(gp_read_file(real, 0, &data, &len, &err), &err);
    CHECK(len == 4 && memcmp(data, "new!", 4) == 0);
    free(data);
}
