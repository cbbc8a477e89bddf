/* test_cli_terminal.c — the command line's answers to mistakes that show
 * only on a terminal or before anything loads (issue 13): `say -o -` with
 * standard output on a terminal refuses to write binary there, a missing
 * -o on a terminal is reported before the model loads, `info` names a
 * tokenizer.json / model config / model_config.yaml instead of "not a tar
 * archive", and `--codec` that does not exist says what to give instead. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define MODEL test_fixture("model-tiny/model")
#define CODEC test_fixture("codec-tiny/nano-tiny.nemo")

/* Run gepard with standard output on a pseudo-terminal (stderr and the
 * terminal's output captured into r); gives up after timeout_s. */
static int run_on_tty(test_cmd_result *r, int timeout_s, const char *const *args) {
    memset(r, 0, sizeof *r);
    int master, slave, errpipe[2];
    if (openpty(&master, &slave, NULL, NULL, NULL) != 0 || pipe(errpipe) != 0) return -1;
    const char *bin = getenv("GEPARD_BIN");
    if (!bin || !*bin) bin = "build/asan/gepard";
    const char *argv[32];
    int n = 0;
    argv[n++] = bin;
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(slave, 1);
        dup2(errpipe[1], 2);
        close(master);
        close(errpipe[0]);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(slave);
    close(errpipe[1]);
    char *bufs[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    int fds[2] = {master, errpipe[0]};
    bool open_fds[2] = {true, true};
    double waited = 0;
    int status = 0;
    bool reaped = false;
    while ((open_fds[0] || open_fds[1]) && waited < timeout_s * 1000.0) {
        struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
        for (int k = 0; k < 2; k++)
            if (!open_fds[k]) p[k].fd = -1;
        int ready = poll(p, 2, 100);
        if (ready == 0) {
            waited += 100;
            /* the terminal side stays open until the child exits */
            if (!reaped && waitpid(pid, &status, WNOHANG) == pid) {
                reaped = true;
                open_fds[0] = false;
            }
            continue;
        }
        for (int k = 0; k < 2; k++) {
            if (!open_fds[k] || !(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char chunk[4096];
            ssize_t got = read(fds[k], chunk, sizeof chunk);
            if (got <= 0) { /* EOF, or EIO on the master once the child is gone */
                open_fds[k] = false;
                continue;
            }
            bufs[k] = realloc(bufs[k], lens[k] + (size_t)got + 1);
            memcpy(bufs[k] + lens[k], chunk, (size_t)got);
            lens[k] += (size_t)got;
            bufs[k][lens[k]] = '\0';
        }
    }
    /* the pipes closed: the child is exiting (give it the rest of the time) */
    while (!reaped && waited < timeout_s * 1000.0) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            reaped = true;
            break;
        }
        usleep(10000);
        waited += 10;
    }
    if (!reaped) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        r->status = 124;
    } else {
        r->status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    close(master);
    close(errpipe[0]);
    r->out = bufs[0] ? bufs[0] : strdup("");
    r->out_len = lens[0];
    r->err = bufs[1] ? bufs[1] : strdup("");
    r->err_len = lens[1];
    return 0;
}

TEST(say_on_a_terminal_refuses_binary_and_checks_before_loading) {
    /* the model does not exist: the output mistake must be what is reported */
    const char *dash[] = {
        "say",   "--model", "/nonexistent/model", "--codec", "/nonexistent.nemo", "-o", "-",
        "Hello", NULL};
    const char *none[] = {"say",   "--model", "/nonexistent/model", "--codec", "/nonexistent.nemo",
                          "Hello", NULL};
    const char *const *cases[] = {dash, none};
    const char *want[] = {"standard output, which is a terminal", "say where the audio goes"};
    for (int i = 0; i < 2; i++) {
        test_cmd_result r;
        REQUIRE(run_on_tty(&r, 60, cases[i]) == 0);
        test_note("%s", r.err);
        CHECK_MSG(r.status == 2, "exit %d", r.status);
        CHECK_MSG(strstr(r.err, want[i]), "stderr lacks \"%s\": %s", want[i], r.err);
        CHECK_MSG(!strstr(r.err, "nonexistent"), "the model was looked at first: %s", r.err);
        CHECK_MSG(r.out_len == 0, "%zu bytes went to the terminal", r.out_len);
        test_cmd_result_free(&r);
    }
    /* -o FILE on a terminal is fine */
    const char *file[] = {"say", "--model",         MODEL,   "--codec", CODEC, "--max-frames", "4",
                          "-o",  test_tmp("t.wav"), "Hello", NULL};
    test_cmd_result r;
    REQUIRE(run_on_tty(&r, 120, file) == 0);
    CHECK_MSG(r.status == 0, "exit %d: %s", r.status, r.err);
    CHECK_MSG(access(test_tmp("t.wav"), F_OK) == 0, "no t.wav: %s", r.err);
    test_cmd_result_free(&r);
}

/* `gepard info` on the text files of a model directory or a codec says what
 * they are and where they belong (it said "not a tar archive"). */
TEST(info_names_tokenizer_and_config_files) {
    /* model_config.yaml from the tiny codec's .nemo (a tar) */
    const char *untar[] = {"tar", "-xf", CODEC, "-C", test_tmpdir(), "./model_config.yaml", NULL};
    test_cmd_result r;
    REQUIRE(test_run_program(&r, NULL, 0, 30, untar) == 0);
    REQUIRE_MSG(r.status == 0, "tar: %s", r.err);
    test_cmd_result_free(&r);
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "%s", test_tmp("model_config.yaml"));
    REQUIRE(test_write_file(test_tmp("other.json"), "{\"a\": 1}", 8) == 0);
    char other[1024];
    snprintf(other, sizeof other, "%s", test_tmp("other.json"));
    struct {
        char path[1024];
        const char *want[3];
    } cases[] = {
        {"", {"a Hugging Face tokenizer", "BPE, 420 vocabulary entries", "gepard tokenize"}},
        {"", {"a model configuration", "model_type gepard", "gepard info on its directory"}},
        {"", {"a NanoCodec configuration", "22050 Hz, 1024 samples per frame", ".nemo archive"}},
        {"", {"a JSON file, not a model file", "gepard info describes", NULL}},
    };
    snprintf(cases[0].path, sizeof cases[0].path, "%s/tokenizer.json", MODEL);
    snprintf(cases[1].path, sizeof cases[1].path, "%s/gepard_config.json", MODEL);
    snprintf(cases[2].path, sizeof cases[2].path, "%s", yaml);
    snprintf(cases[3].path, sizeof cases[3].path, "%s", other);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"info", cases[i].path, NULL};
        REQUIRE(test_run_gepard(&r, NULL, 0, 60, args) == 0);
        test_note("%s", r.out);
        CHECK_MSG(r.status == 0, "info %s: exit %d: %s", cases[i].path, r.status, r.err);
        for (int k = 0; k < 3 && cases[i].want[k]; k++)
            CHECK_MSG(strstr(r.out, cases[i].want[k]), "info %s lacks \"%s\": %s", cases[i].path,
                      cases[i].want[k], r.out);
        CHECK(!strstr(r.out, "tar archive") && !strstr(r.err, "tar archive"));
        test_cmd_result_free(&r);
    }
}

/* A --codec that is not there names the file and what to give instead (it
 * said "/nonexistent: cannot open: No such file or directory"). */
TEST(codec_that_does_not_exist_says_what_to_give) {
    const char *args[] = {"say", "--model",         MODEL,   "--codec", "/nonexistent/codec.nemo",
                          "-o",  test_tmp("x.wav"), "Hello", NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 60, args) == 0);
    test_note("%s", r.err);
    CHECK_EQ_INT(r.status, 1);
    const char *want[] = {"/nonexistent/codec.nemo: No such file or directory", "NanoCodec",
                          ".nemo file", "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps"};
    for (int k = 0; k < 4; k++)
        CHECK_MSG(strstr(r.err, want[k]), "stderr lacks \"%s\": %s", want[k], r.err);
    test_cmd_result_free(&r);
}
