/* fd_limit.h — raising the open-file limit for commands that hold many
 * sockets at once (`gepard serve` with thousands of connections, `gepard
 * loadtest` with thousands in flight). */
#ifndef GP_CLI_FD_LIMIT_H
#define GP_CLI_FD_LIMIT_H

/* Raise the soft RLIMIT_NOFILE to at least `need` descriptors (up to the hard
 * limit). Returns the soft limit now in force; warns (naming `what` and
 * `ulimit -n`) when it is below `need`. */
long cli_raise_fd_limit(long need, const char *what);

#endif
