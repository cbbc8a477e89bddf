/* log.h — leveled logging to stderr and TTY-only progress lines.
 *
 * The logger is the one mutable global the house rules allow. By default it
 * prints warnings and errors always, and info messages only when stderr is a
 * terminal, so piped runs stay quiet and parseable. Progress lines
 * (gp_progress) redraw a single status line and are shown only on a TTY.
 */
#ifndef GP_BASE_LOG_H
#define GP_BASE_LOG_H

#include <stdbool.h>

typedef enum gp_log_level {
    GP_LOG_DEBUG = 0,
    GP_LOG_INFO = 1,
    GP_LOG_WARN = 2,
    GP_LOG_ERROR = 3,
    GP_LOG_SILENT = 4
} gp_log_level;

/* Set the minimum level printed. GEPARD_LOG=debug|info|warn|error|silent in the
 * environment overrides the default chosen at first use. */
void gp_log_set_level(gp_log_level level);
gp_log_level gp_log_get_level(void);

void gp_log(gp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define GP_DEBUG(...) gp_log(GP_LOG_DEBUG, __VA_ARGS__)
#define GP_INFO(...) gp_log(GP_LOG_INFO, __VA_ARGS__)
#define GP_WARN(...) gp_log(GP_LOG_WARN, __VA_ARGS__)
#define GP_ERROR(...) gp_log(GP_LOG_ERROR, __VA_ARGS__)

/* True when stderr is a terminal and progress lines should be drawn. */
bool gp_progress_enabled(void);
/* Force progress on or off (tests, --quiet). */
void gp_progress_set_enabled(bool enabled);
/* Redraw the progress line ("\r...\033[K"); no-op when disabled. */
void gp_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* End the progress line with a newline if one was drawn. */
void gp_progress_done(void);

#endif
