/* test_hub.c — the Hub client's offline parts: SHA-256 against the FIPS
 * 180-4 vectors, the cache/endpoint/token/offline settings read from the
 * environment (INTERFACES.md §2), repo id / revision / file name checks, and
 * the local-path-or-repo-id decision. The network paths are in
 * test_hub_download.c. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/file.h"
#include "io/hub.h"
#include "io/hub_internal.h"
#include "io/sha256.h"
#include "test.h"

TEST(sha256_fips_vectors) {
    char hex[65];
    gp_sha256_hex("", 0, hex);
    CHECK(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    gp_sha256_hex("abc", 3, hex);
    CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    gp_sha256_hex(two_blocks, strlen(two_blocks), hex);
    CHECK(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0);
    /* One million 'a', fed in uneven pieces to exercise the block buffer. */
    char *a = malloc(1000000);
    REQUIRE(a);
    memset(a, 'a', 1000000);
    gp_sha256 s;
    gp_sha256_init(&s);
    size_t pos = 0, step = 1;
    while (pos < 1000000) {
        size_t n = step < 1000000 - pos ? step : 1000000 - pos;
        gp_sha256_update(&s, a + pos, n);
        pos += n;
        step = step * 3 % 1000 + 1;
    }
    gp_sha256_final_hex(&s, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0);
    free(a);
    /* Zero bytes, at lengths around the padding boundaries (Python hashlib). */
    unsigned char *zero = calloc(1, 128);
    REQUIRE(zero);
    static const struct {
        size_t len;
        const char *hex;
    } zeros[] = {
        {55, "02779466cdec163811d078815c633f21901413081449002f24aa3e80f0b88ef7"},
        {56, "d4817aa5497628e7c77e6b606107042bbba3130888c5f47a375e6179be789fbb"},
        {63, "c7723fa1e0127975e49e62e753db53924c1bd84b8ac1ac08df78d09270f3d971"},
        {64, "f5a5fd42d16a20302798ef6ed309979b43003d2320d9f0e8ea9831a92759fb4b"},
        {65, "98ce42deef51d40269d542f5314bef2c7468d401ad5d85168bfab4c0108f75f7"},
        {119, "f616b0d54e78571a9611f343c9f8e022e859e920381ab0e4d3da01e193a7bd7e"},
        {120, "6edd9f6f9cc92cded36e6c4a580933f9c9f1b90562b46903b806f21902a1a54f"},
    };
    for (size_t i = 0; i < sizeof zeros / sizeof zeros[0]; i++) {
        gp_sha256_hex(zero, zeros[i].len, hex);
        CHECK_MSG(strcmp(hex, zeros[i].hex) == 0, "%zu zero bytes: %s", zeros[i].len, hex);
    }
    free(zero);
}

static void clear_hf_env(void) {
    static const char *vars[] = {"HF_HUB_CACHE",  "HF_HOME",     "XDG_CACHE_HOME", "HF_TOKEN",
                                 "HF_TOKEN_PATH", "HF_ENDPOINT", "HF_HUB_OFFLINE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void check_cache_dir(const char *want) {
    char *dir = NULL;
    gp_error err;
    if (gp_hub_cache_dir(NULL, &dir, &err) != 0) {
        test_fail(__FILE__, __LINE__, "gp_hub_cache_dir failed: %s", err.message);
        return;
    }
    CHECK_MSG(strcmp(dir, want) == 0, "cache dir %s, expected %s", dir, want);
    free(dir);
}

TEST(hub_cache_dir_precedence) {
    clear_hf_env();
    setenv("HOME", "/home/someone", 1);
    check_cache_dir("/home/someone/.cache/huggingface/hub");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    check_cache_dir("/xdg/huggingface/hub");
    setenv("HF_HOME", "/hf-home", 1);
    check_cache_dir("/hf-home/hub");
    setenv("HF_HUB_CACHE", "/the/cache", 1);
    check_cache_dir("/the/cache");
    setenv("HF_HUB_CACHE", "~/c", 1);
    check_cache_dir("/home/someone/c");
    gp_hub_options o = gp_hub_default_options();
    o.cache_dir = "/explicit";
    char *dir = NULL;
    gp_error err;
    REQUIRE_OK(gp_hub_cache_dir(&o, &dir, &err), &err);
    CHECK(strcmp(dir, "/explicit") == 0);
    free(dir);
}

TEST(hub_endpoint_and_offline) {
    clear_hf_env();
    char *ep = NULL;
    gp_error err;
    REQUIRE_OK(gp_hub_endpoint(NULL, &ep, &err), &err);
    CHECK(strcmp(ep, "https://huggingface.co") == 0);
    free(ep);
    setenv("HF_ENDPOINT", "http://mirror.example:8080/", 1);
    REQUIRE_OK(gp_hub_endpoint(NULL, &ep, &err), &err);
    CHECK(strcmp(ep, "http://mirror.example:8080") == 0);
    free(ep);
    setenv("HF_ENDPOINT", "ftp://x", 1);
    CHECK_ERR_CONTAINS(gp_hub_endpoint(NULL, &ep, &err), &err, "not an http");
    CHECK(!gp_hub_is_offline(NULL));
    static const char *yes[] = {"1", "true", "YES", "On"};
    for (int i = 0; i < 4; i++) {
        setenv("HF_HUB_OFFLINE", yes[i], 1);
        CHECK_MSG(gp_hub_is_offline(NULL), "HF_HUB_OFFLINE=%s", yes[i]);
    }
    setenv("HF_HUB_OFFLINE", "0", 1);
    CHECK(!gp_hub_is_offline(NULL));
    gp_hub_options o = gp_hub_default_options();
    o.offline = true;
    CHECK(gp_hub_is_offline(&o));
}

static void check_token(const char *want) {
    char *tok = NULL;
    gp_error err;
    if (gp_hub_token(NULL, &tok, &err) != 0) {
        test_fail(__FILE__, __LINE__, "gp_hub_token failed: %s", err.message);
        return;
    }
    CHECK_MSG(want ? tok && strcmp(tok, want) == 0 : tok == NULL, "token \"%s\", expected \"%s\"",
              tok ? tok : "(none)", want ? want : "(none)");
    free(tok);
}

TEST(hub_token_precedence) {
    clear_hf_env();
    setenv("HOME", test_tmp("home"), 1);
    check_token(NULL);
    /* Default file: ~/.cache/huggingface/token. */
    mkdir(test_tmp("home"), 0755);
    mkdir(test_tmp("home/.cache"), 0755);
    mkdir(test_tmp("home/.cache/huggingface"), 0755);
    test_write_file(test_tmp("home/.cache/huggingface/token"), "hf_default\n", 11);
    check_token("hf_default");
    /* $HF_HOME/token replaces it. */
    mkdir(test_tmp("hfhome"), 0755);
    test_write_file(test_tmp("hfhome/token"), "  hf_home \n", 11);
    setenv("HF_HOME", test_tmp("hfhome"), 1);
    check_token("hf_home");
    /* HF_TOKEN_PATH beats $HF_HOME/token. */
    test_write_file(test_tmp("tokfile"), "hf_path", 7);
    setenv("HF_TOKEN_PATH", test_tmp("tokfile"), 1);
    check_token("hf_path");
    /* HF_TOKEN beats every file. */
    setenv("HF_TOKEN", "hf_env", 1);
    check_token("hf_env");
    /* The option beats everything; "" means none. */
    gp_hub_options o = gp_hub_default_options();
    o.token = "";
    char *tok = (char *)"x";
    gp_error err;
    REQUIRE_OK(gp_hub_token(&o, &tok, &err), &err);
    CHECK(tok == NULL);
    setenv("HF_TOKEN", "bad token", 1);
    CHECK_ERR_CONTAINS(gp_hub_token(NULL, &tok, &err), &err, "spaces or control characters");
}

TEST(hub_names_are_checked) {
    gp_error err;
    static const char *good[] = {"nineninesix/gepard-1.0", "nvidia/nemo-nano-codec-22khz", "a/b",
                                 "Org_1/name.v2"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK_MSG(gp_hub_validate_repo_id(good[i], &err) == 0, "%s: %s", good[i], err.message);
    static const char *bad[] = {"",       "gpt2",   "a/b/c",   "/abs/x", "../x",  "a/..",
                                "a/b..c", "a--b/c", "a/-b",    "a/b.",   "a b/c", "a/",
                                "/b",     "a/b\n",  "~/model", "./x/y"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(gp_hub_validate_repo_id(bad[i], &err) != 0, "\"%s\" accepted", bad[i]);
    CHECK(strstr(err.message, "org/name") != NULL);
    CHECK(gp_hub_validate_revision("main", &err) == 0);
    CHECK(gp_hub_validate_revision("refs/pr/1", &err) == 0);
    CHECK(gp_hub_validate_revision("v1.0", &err) == 0);
    CHECK(gp_hub_validate_revision("../x", &err) != 0);
    CHECK(gp_hub_validate_revision("a/../b", &err) != 0);
    CHECK(gp_hub_validate_revision("/x", &err) != 0);
    CHECK(gp_hub_validate_revision("a b", &err) != 0);
    CHECK(gp_hub_validate_filename("model.safetensors", &err) == 0);
    CHECK(gp_hub_validate_filename("a/b/c.json", &err) == 0);
    static const char *bad_files[] = {"",   "/etc/passwd", "../x", "a/../../x", "a//b",
                                      "a/", "./a",         "a\\b", "a\nb"};
    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++)
        CHECK_MSG(gp_hub_validate_filename(bad_files[i], &err) != 0, "\"%s\" accepted",
                  bad_files[i]);
    CHECK(gp_hub_is_commit("0123456789abcdef0123456789abcdef01234567"));
    CHECK(!gp_hub_is_commit("0123456789ABCDEF0123456789abcdef01234567"));
    CHECK(!gp_hub_is_commit("main"));
}

TEST(hub_local_path_or_repo_id) {
    REQUIRE(chdir(test_tmpdir()) == 0);
    mkdir("org", 0755);
    mkdir("org/name", 0755);
    CHECK(!gp_hub_is_repo_id("org/name")); /* an existing directory wins */
    CHECK(gp_hub_is_repo_id("org/other"));
    CHECK(!gp_hub_is_repo_id("./org"));
    CHECK(!gp_hub_is_repo_id("/abs/path"));
    CHECK(!gp_hub_is_repo_id("model-dir"));
    /* gp_hub_resolve_model hands an existing path back untouched. */
    char *dir = NULL;
    gp_error err;
    REQUIRE_OK(gp_hub_resolve_model(NULL, "org/name", &dir, &err), &err);
    CHECK(strcmp(dir, "org/name") == 0);
    free(dir);
    CHECK_ERR_CONTAINS(gp_hub_resolve_model(NULL, "no-such-dir", &dir, &err), &err,
                       "not a Hugging Face repo id");
    CHECK(dir == NULL);
}

TEST(hub_snapshot_links_are_relative) {
    clear_hf_env();
    gp_hub_options o = gp_hub_default_options();
    o.cache_dir = test_tmp("cache");
    o.offline = true;
    gp_hub_ctx ctx;
    gp_error err;
    REQUIRE_OK(gp_hub_ctx_init(&ctx, &o, "acme/tiny", &err), &err);
    CHECK(strcmp(gp_path_basename(ctx.repo_dir), "models--acme--tiny") == 0);
    const char *commit = "1111111111111111111111111111111111111111";
    REQUIRE_OK(gp_hub_link_snapshot(&ctx, commit, "a.json", "e1", &err), &err);
    REQUIRE_OK(gp_hub_link_snapshot(&ctx, commit, "x/y/b.bin", "e2", &err), &err);
    REQUIRE_OK(gp_hub_link_snapshot(&ctx, commit, "x/y/b.bin", "e3", &err), &err); /* replace */
    char target[256];
    char *p = gp_hub_snapshot_path(&ctx, commit, "a.json");
    ssize_t n = readlink(p, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    CHECK_MSG(strcmp(target, "../../blobs/e1") == 0, "link target %s", target);
    free(p);
    p = gp_hub_snapshot_path(&ctx, commit, "x/y/b.bin");
    n = readlink(p, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    CHECK_MSG(strcmp(target, "../../../../blobs/e3") == 0, "link target %s", target);
    free(p);
    /* refs: written bare, read back, nested names allowed. */
    REQUIRE_OK(gp_hub_write_ref(&ctx, "refs/pr/1", commit, &err), &err);
    char got[41];
    CHECK(gp_hub_read_ref(&ctx, "refs/pr/1", got) && strcmp(got, commit) == 0);
    CHECK(!gp_hub_read_ref(&ctx, "main", got));
    gp_hub_ctx_clear(&ctx);
}
