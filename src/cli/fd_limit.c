/* fd_limit.c — raising the open-file limit (see fd_limit.h). */
#include "cli/fd_limit.h"

#include <stdio.h>
#include <sys/resource.h>

long cli_raise_fd_limit(long need, const char *what) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
    if (r.rlim_cur != RLIM_INFINITY && (long)r.rlim_cur < need) {
        rlim_t want = (rlim_t)need;
        if (r.rlim_max != RLIM_INFINITY && want > r.rlim_max) want = r.rlim_max;
        r.rlim_cur = want;
        setrlimit(RLIMIT_NOFILE, &r);
        getrlimit(RLIMIT_NOFILE, &r);
    }
    long have = r.rlim_cur == RLIM_INFINITY ? need : (long)r.rlim_cur;
    if (have < need)
        fprintf(stderr,
                "gepard: warning: %s needs about %ld open files but the limit is %ld; raise it "
                "with `ulimit -n %ld` (or LimitNOFILE= in a systemd unit)\n",
                what, need, have, need);
    return have;
}
