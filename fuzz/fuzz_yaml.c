/* fuzz_yaml.c — libFuzzer harness for the YAML reader (io/yaml.c, over
 * libyaml) and the NanoCodec settings read from it (codec/config.c), as a
 * .nemo's model_config.yaml is. Seeds: the codec fixture's model_config.yaml
 * and fuzz/seeds/yaml/. */
#include "fuzz_common.h"

#include "base/log.h"
#include "codec/config.h"
#include "io/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    gp_error err;
    gp_error_clear(&err);
    gp_yaml_doc *doc = NULL;
    int rc = gp_yaml_parse((const char *)data, size, "model_config.yaml", &doc, &err);
    fuzz_check_error(rc, &err);
    if (rc) return 0;
    const gp_yaml_node *root = gp_yaml_root(doc);
    char buf[256];
    for (int i = 0; root && i < 64; i++) {
        const gp_yaml_node *c = gp_yaml_child(doc, root, i);
        if (!c) break;
        (void)gp_yaml_path(doc, c, buf, sizeof buf);
    }
    gp_codec_config cfg;
    gp_error e2;
    gp_error_clear(&e2);
    int r2 = gp_codec_config_parse(doc, &cfg, &e2);
    fuzz_check_error(r2, &e2);
    gp_yaml_free(doc);
    return 0;
}
