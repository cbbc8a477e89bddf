/* test_say_note.c — `gepard say`'s note when played audio came slower than
 * real time (engine/realtime_note.h): when it is due, and what it suggests for each
 * weight format. */
#include <string.h>

#include "engine/realtime_note.h"
#include "test.h"

TEST(say_note_only_when_played_audio_was_late_on_the_cpu) {
    char note[512];
    gepard_synth_result r;
    memset(&r, 0, sizeof r);
    r.audio_seconds = 3.0;
    r.rtf = 0.8;
    CHECK(!gp_realtime_note(note, sizeof note, &r, "cpu", GEPARD_WEIGHTS_DEFAULT));
    r.rtf = 1.3;
    CHECK(!gp_realtime_note(note, sizeof note, &r, "cuda:0", GEPARD_WEIGHTS_DEFAULT));
    r.audio_seconds = 0.5; /* too short to tell */
    CHECK(!gp_realtime_note(note, sizeof note, &r, "cpu", GEPARD_WEIGHTS_DEFAULT));
    r.audio_seconds = 3.0;
    REQUIRE(gp_realtime_note(note, sizeof note, &r, "cpu", GEPARD_WEIGHTS_DEFAULT));
    test_note("%s", note);
    CHECK(strstr(note, "1.30") && strstr(note, "bf16") && strstr(note, "--dtype int8"));
    REQUIRE(gp_realtime_note(note, sizeof note, &r, "cpu", GEPARD_WEIGHTS_INT8));
    CHECK(strstr(note, "with int8") && strstr(note, "--dtype q4"));
    REQUIRE(gp_realtime_note(note, sizeof note, &r, "cpu", GEPARD_WEIGHTS_Q4));
    CHECK(strstr(note, "with q4") && strstr(note, "--threads"));
}
