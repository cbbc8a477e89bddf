/* test_deploy.c — the deployment recipe (deploy/) checked as far as this
 * machine can: deploy/check-recipe.sh's quick checks (the Dockerfile's
 * structure, the build stage's package step, the runtime stage's apt step
 * resolved and its package list covering every library the ASan binary
 * links, the Kubernetes manifests against the API schema and field names,
 * nginx -t, systemd-analyze verify). A check whose tool is missing (node
 * modules, apt lists, nginx) is skipped by the script with a reason, shown
 * here as notes. The full check (a release build through deploy/build.sh,
 * served and load-tested) is `make check-deploy-full`. */
#include <stdlib.h>
#include <string.h>

#include "test.h"

TEST(deploy_recipe_quick_checks) {
    const char *bin = getenv("GEPARD_BIN");
    const char *argv[] = {"sh", "deploy/check-recipe.sh", bin && *bin ? bin : "build/asan/gepard",
                          NULL};
    test_cmd_result r;
    REQUIRE(test_run_program(&r, NULL, 0, 120, argv) == 0);
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, "ok", 2) != 0) test_note("%s", line);
    CHECK_MSG(r.status == 0, "deploy/check-recipe.sh failed (status %d): %s", r.status, r.err);
    test_cmd_result_free(&r);
}
