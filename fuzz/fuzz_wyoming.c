/* fuzz_wyoming.c — libFuzzer harness for the Wyoming events a client sends
 * (server/wyoming.c, `gepard serve --wyoming-port`): the input is read as a
 * stream of events, as the server's hub reads a socket; every event taken
 * must lie inside the input with an object for its data, and a refusal must
 * say why. Seeds: fuzz/seeds/wyoming/. */
#include "fuzz_common.h"

#include "server/ws_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = (const char *)data;
    size_t used = 0;
    while (used < size) {
        gp_wy_event ev;
        const char *why = NULL;
        size_t need = 0;
        long k = gp_wy_parse_event(p + used, size - used, &ev, &why, &need);
        if (k < 0) {
            if (!why || !*why) __builtin_trap();
            break;
        }
        if (k == 0) {
            if (need <= size - used) __builtin_trap(); /* it could have been whole */
            break;
        }
        if ((size_t)k > size - used) __builtin_trap();
        if (ev.type && (!*ev.type || !cJSON_IsObject(ev.data) || ev.payload < p + used ||
                        ev.payload + ev.payload_len > p + used + (size_t)k))
            __builtin_trap();
        gp_wy_event_free(&ev);
        used += (size_t)k;
    }
    return 0;
}
