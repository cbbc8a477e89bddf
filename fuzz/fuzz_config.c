/* fuzz_config.c — libFuzzer harness for the model configuration parsers
 * (model/config.c): gepard_config.json when the object has a
 * "backbone_config", otherwise a backbone-only config.json, as
 * gp_model_config_load would read them. Seeds: fuzz/seeds/config/ and the
 * fixture model's two files. */
#include "fuzz_common.h"

#include "base/log.h"
#include "io/json.h"
#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    gp_error err;
    gp_error_clear(&err);
    cJSON *root = NULL;
    int rc = gp_json_parse((const char *)data, size, "gepard_config.json", &root, &err);
    fuzz_check_error(rc, &err);
    if (rc) return 0;
    gp_model_config cfg;
    if (cJSON_GetObjectItemCaseSensitive(root, "backbone_config")) {
        rc = gp_model_config_parse_gepard(root, "gepard_config.json", &cfg, &err);
    } else {
        memset(&cfg, 0, sizeof cfg);
        rc = gp_backbone_config_parse(root, "config.json", -1, &cfg.backbone, &err);
    }
    fuzz_check_error(rc, &err);
    cJSON_Delete(root);
    return 0;
}
