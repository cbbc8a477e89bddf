/* test_admission.c — the engine's real-time admission (engine/admission.h,
 * issue 12): the projection from measured cycles, and an engine that holds
 * back queued streams when a cycle with one more would exceed its budget
 * (and batches them when it would not). */
#include <pthread.h>
#include <string.h>

#include "engine/admission.h"
#include "gepard.h"
#include "test.h"

TEST(admission_projects_from_measured_cycles) {
    gp_admission a;
    REQUIRE(gp_admission_init(&a, 64, 0.8, 0.05) == 0); /* budget 40 ms */
    /* nothing measured: one stream at a time, running streams are kept */
    CHECK_EQ_INT(gp_admission_capacity(&a, 0), 1);
    CHECK_EQ_INT(gp_admission_capacity(&a, 5), 5);
    /* 10 ms with one stream: proportional (30 ms for 3), but no more than
     * twice the largest batch measured */
    gp_admission_record(&a, 1, 0.010);
    CHECK(gp_admission_projected(&a, 3) > 0.0299 && gp_admission_projected(&a, 3) < 0.0301);
    CHECK_EQ_INT(gp_admission_capacity(&a, 1), 2);
    /* 2 streams cost 11 ms: 1 ms per stream more (secant from 1), up to 4 */
    gp_admission_record(&a, 2, 0.011);
    CHECK(gp_admission_projected(&a, 3) > 0.0119 && gp_admission_projected(&a, 3) < 0.0121);
    CHECK_EQ_INT(gp_admission_capacity(&a, 2), 4);
    gp_admission_record(&a, 4, 0.012); /* secant from 2: 0.5 ms per stream */
    CHECK_EQ_INT(gp_admission_capacity(&a, 4), 8);
    /* the cost turns steep at 8 (27 ms: 3.75 ms per stream from 4): 11 fit */
    gp_admission_record(&a, 8, 0.027);
    CHECK(gp_admission_projected(&a, 11) > 0.0382 && gp_admission_projected(&a, 11) < 0.0383);
    CHECK_EQ_INT(gp_admission_capacity(&a, 8), 11);
    /* a cycle measured at 9 during a burst of prefills (60 ms) does not block
     * admission: the projection from 8 is lower (30.75 ms) */
    gp_admission_record(&a, 9, 0.060);
    CHECK(gp_admission_projected(&a, 9) > 0.0307 && gp_admission_projected(&a, 9) < 0.0308);
    /* the first cycle at a new size (a GPU captures its graph) counts as at
     * most twice its projection */
    gp_admission_record(&a, 3, 0.300); /* projected 11 + 1 = 12 ms: counts as 24 */
    CHECK(a.cycle_by_n[3] > 0.0239 && a.cycle_by_n[3] < 0.0241);
    /* smoothing: a cycle moves the estimate a quarter of the way, and one more
     * than twice the estimate (a one-off: a graph capture) counts as twice it */
    gp_admission_record(&a, 1, 0.050);
    CHECK(gp_admission_projected(&a, 1) > 0.0124 && gp_admission_projected(&a, 1) < 0.0126);
    gp_admission_record(&a, 1, 0.0125);
    CHECK(gp_admission_projected(&a, 1) > 0.0124 && gp_admission_projected(&a, 1) < 0.0126);
    /* over budget already: nobody new, nobody dropped */
    gp_admission_record(&a, 20, 0.045);
    CHECK_EQ_INT(gp_admission_capacity(&a, 20), 20);
    gp_admission_free(&a);
    /* margin 0: every slot */
    REQUIRE(gp_admission_init(&a, 64, 0, 0.05) == 0);
    CHECK_EQ_INT(gp_admission_capacity(&a, 0), 64);
    gp_admission_free(&a);
}

/* A GPU-like cost (4 ms fixed + 0.05 ms per stream; 40 ms budget: 720 fit):
 * admission doubles the batch per measurement, never past 720, and settles
 * at 720 in a dozen cycles. */
TEST(admission_grows_to_the_real_time_limit) {
    gp_admission a;
    REQUIRE(gp_admission_init(&a, 1024, 0.8, 0.05) == 0);
    int active = 0, cycles = 0, largest = 0;
    for (; cycles < 40; cycles++) {
        active = gp_admission_capacity(&a, active);
        if (active > largest) largest = active;
        gp_admission_record(&a, active, 0.004 + 0.00005 * active);
        if (cycles > 0 && gp_admission_capacity(&a, active) == active) break;
    }
    test_note("settled at %d streams after %d cycles (largest %d)", active, cycles, largest);
    CHECK(largest <= 720);
    CHECK(active >= 700);
    CHECK(cycles <= 14);
    gp_admission_free(&a);
}

/* Figures from a warm-up become provisional: the first cycle in service at
 * a size replaces its figure and teaches the factor the others are scaled
 * by; the admit limit grows the active streams by at most a quarter. */
TEST(admission_service_replaces_provisional_figures) {
    gp_admission a;
    REQUIRE(gp_admission_init(&a, 1024, 0.8, 0.05) == 0); /* budget 40 ms */
    /* warm-up: 4 ms + 0.05 ms per stream at 1..9, 10, 20, ... 200 */
    for (int n = 1; n <= 200; n += n < 10 ? 1 : 10) gp_admission_record(&a, n, 0.004 + 0.00005 * n);
    gp_admission_begin_service(&a);
    CHECK(a.provisional[100] && a.provisional[200] && !a.provisional[205]);
    /* service at 100 costs twice the warm-up's 9 ms: replaced (no smoothing),
     * and the factor moves half way to 2, so 200's 14 ms now reads 21 */
    gp_admission_record(&a, 100, 0.018);
    CHECK(!a.provisional[100]);
    CHECK(a.cycle_by_n[100] > 0.01799 && a.cycle_by_n[100] < 0.01801);
    CHECK(a.service_factor > 1.49 && a.service_factor < 1.51);
    CHECK(gp_admission_projected(&a, 200) > 0.0209 && gp_admission_projected(&a, 200) < 0.0211);
    /* the admit limit: a quarter more than the active streams, at least 16 */
    CHECK_EQ_INT(gp_admission_admit_limit(&a, 100), 125);
    CHECK_EQ_INT(gp_admission_admit_limit(&a, 10), 26);
    CHECK_EQ_INT(gp_admission_admit_limit(&a, 0), 16);
    gp_admission_free(&a);
}

/* A burst after a warm-up whose cycles (2 ms + 0.02 ms per stream) are 2.5
 * times cheaper than service's: on the warm-up's figures all 1024 streams
 * fit the 37 ms budget (22.5 ms), in service only 640 do (2.5 × (2 + 0.02 ×
 * 640) = 37 ms). Admitted cycle by cycle with the admit limit, the active
 * streams settle near 640 and never run far past it. */
TEST(admission_paces_a_burst_after_a_warm_up) {
    gp_admission a;
    REQUIRE(gp_admission_init(&a, 1024, 0.8, 0.0464) == 0); /* budget 37.1 ms */
    for (int n = 1; n <= 1024; n = n < 64 ? n + 1 : n + n / 8)
        gp_admission_record(&a, n, 0.002 + 0.00002 * n);
    gp_admission_record(&a, 1024, 0.002 + 0.00002 * 1024);
    CHECK_EQ_INT(gp_admission_capacity(&a, 0), 1024); /* the warm-up's figures */
    gp_admission_begin_service(&a);
    int active = 0, largest = 0, cycles = 0;
    for (; cycles < 80; cycles++) {
        active = gp_admission_admit_limit(&a, active);
        if (active > largest) largest = active;
        gp_admission_record(&a, active, 2.5 * (0.002 + 0.00002 * active));
    }
    test_note("after %d cycles: %d active (largest %d), service factor %.2f", cycles, active,
              largest, a.service_factor);
    CHECK(largest <= 680);
    CHECK(active >= 600);
    gp_admission_free(&a);
}

typedef struct job {
    gepard_engine *engine;
    gepard_status status;
    size_t samples;
} job;

static int count_audio(const float *samples, size_t n, void *user) {
    (void)samples;
    ((job *)user)->samples += n;
    return 0;
}

static void *run_job(void *arg) {
    job *j = arg;
    gepard_synth_params p = gepard_synth_default_params();
    p.random_seed = 0;
    p.seed = 3;
    p.stop_threshold = 2.0f; /* never stops early: max_frames each */
    p.max_frames = 12;
    gepard_stream_callbacks cb = {.on_audio = count_audio, .user = j};
    j->status = gepard_synthesize(j->engine, "Hello there, world.", &p, &cb, NULL);
    return NULL;
}

/* 6 requests at once on 6 slots; returns the largest batch. */
static int run_six(double margin, gepard_engine_stats *st) {
    gepard_load_params lp = gepard_load_default_params();
    lp.weights = GEPARD_WEIGHTS_F32;
    gepard_model *m = NULL;
    gepard_codec *c = NULL;
    gepard_engine *e = NULL;
    if (gepard_model_load(test_fixture("model-tiny/model"), &lp, &m) ||
        gepard_codec_load(test_fixture("codec-tiny/nano-tiny.nemo"), &c)) {
        gepard_model_free(m);
        return -1;
    }
    gepard_engine_params ep = gepard_engine_default_params();
    ep.threads = 1;
    ep.max_streams = 6;
    ep.realtime_margin = margin;
    int largest = -1;
    if (gepard_engine_create(m, c, &ep, &e) == GEPARD_OK) {
        job jobs[6];
        pthread_t t[6];
        for (int i = 0; i < 6; i++) {
            memset(&jobs[i], 0, sizeof jobs[i]);
            jobs[i].engine = e;
            pthread_create(&t[i], NULL, run_job, &jobs[i]);
        }
        largest = 0;
        for (int i = 0; i < 6; i++) {
            pthread_join(t[i], NULL);
            if (jobs[i].status != GEPARD_OK || jobs[i].samples != 12 * 1024) largest = -2;
        }
        gepard_engine_get_stats(e, st);
        if (largest == 0) largest = st->max_batch;
        gepard_engine_free(e);
    }
    gepard_codec_free(c);
    gepard_model_free(m);
    return largest;
}

TEST(admission_engine_holds_back_what_would_not_be_real_time) {
    gepard_engine_stats st;
    /* A budget of 46 ns: no cycle fits, so the engine runs one stream at a
     * time and every request still completes. */
    int largest = run_six(1e-6, &st);
    test_note("margin 1e-6: largest batch %d, capacity %d, cycle %.2f ms", largest,
              st.realtime_capacity, st.cycle_ms);
    CHECK_EQ_INT(largest, 1);
    CHECK_EQ_INT(st.realtime_capacity, 1);
    CHECK(st.cycle_ms > 0);
    /* A budget of 100 frame durations: the tiny model's cycles fit, so the
     * streams are batched as without a limit. */
    largest = run_six(100.0, &st);
    test_note("margin 100: largest batch %d, capacity %d", largest, st.realtime_capacity);
    CHECK(largest > 1);
    CHECK_EQ_INT(st.realtime_capacity, 6);
}

/* Without a real-time limit (margin 0) nothing is paced: a burst fills every
 * slot in one cycle, as the capacity says. */
TEST(admission_without_a_limit_admits_every_slot_at_once) {
    gp_admission a;
    REQUIRE(gp_admission_init(&a, 1024, 0, 0.0464) == 0);
    gp_admission_begin_service(&a);
    CHECK_EQ_INT(gp_admission_admit_limit(&a, 0), 1024);
    CHECK_EQ_INT(gp_admission_admit_limit(&a, 16), 1024);
    gp_admission_free(&a);
}
