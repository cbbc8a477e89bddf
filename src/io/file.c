/* file.c — file reading, mapping and atomic writing (see file.h). */
#include "io/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int gp_read_file(const char *path, size_t max_bytes, char **data, size_t *len, gp_error *err) {
    *data = NULL;
    if (len) *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return gp_fail(err, errno == ENOENT ? GEPARD_ERR_NOT_FOUND : GEPARD_ERR_IO,
                       "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || S_ISDIR(st.st_mode)) {
        fclose(fp);
        return gp_fail(err, GEPARD_ERR_IO, "%s: is a directory, expected a file", path);
    }
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, used = 0;
    if (max_bytes && cap > max_bytes + 1) cap = max_bytes + 1;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(fp);
        return gp_fail_oom(err, path, cap);
    }
    for (;;) {
        if (used + 1 >= cap) {
            if (max_bytes && used >= max_bytes) {
                free(buf);
                fclose(fp);
                return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                               "%s: larger than the %zu-byte limit for this kind of file", path,
                               max_bytes);
            }
            size_t ncap = cap * 2;
            char *nbuf = realloc(buf, ncap);
            if (!nbuf) {
                free(buf);
                fclose(fp);
                return gp_fail_oom(err, path, ncap);
            }
            buf = nbuf;
            cap = ncap;
        }
        size_t n = fread(buf + used, 1, cap - 1 - used, fp);
        used += n;
        if (n == 0) break;
    }
    int failed = ferror(fp);
    fclose(fp);
    if (failed) {
        free(buf);
        return gp_fail(err, GEPARD_ERR_IO, "%s: read error", path);
    }
    if (max_bytes && used > max_bytes) {
        free(buf);
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "%s: larger than the %zu-byte limit for this kind of file", path, max_bytes);
    }
    buf[used] = '\0';
    *data = buf;
    if (len) *len = used;
    return GEPARD_OK;
}

int gp_map_file(const char *path, gp_mapped_file *out, gp_error *err) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return gp_fail(err, errno == ENOENT ? GEPARD_ERR_NOT_FOUND : GEPARD_ERR_IO,
                       "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return gp_fail(err, GEPARD_ERR_IO, "%s: is a directory, expected a file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        out->data = (const unsigned char *)"";
        return GEPARD_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot map: %s", path, strerror(e));
    out->data = p;
    out->size = (size_t)st.st_size;
    return GEPARD_OK;
}

void gp_unmap_file(gp_mapped_file *mapped) {
    if (mapped->data && mapped->size) munmap((void *)mapped->data, mapped->size);
    mapped->data = NULL;
    mapped->size = 0;
}

bool gp_path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

bool gp_path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *gp_path_basename(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

bool gp_path_has_suffix(const char *path, const char *suffix) {
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && strcasecmp(path + n - m, suffix) == 0;
}

char *gp_path_join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t m = strlen(name);
    char *p = malloc(n + m + 2);
    if (!p) return NULL;
    memcpy(p, dir, n);
    p[n] = '/';
    memcpy(p + n + 1, name, m + 1);
    return p;
}

int gp_make_dirs(const char *path, gp_error *err) {
    char *copy = strdup(path);
    if (!copy) return gp_fail_oom(err, "path", strlen(path));
    for (char *p = copy + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(copy, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            gp_fail(err, GEPARD_ERR_IO, "%s: cannot create directory: %s", copy, strerror(e));
            free(copy);
            return GEPARD_ERR_IO;
        }
        *p = '/';
    }
    int rc = GEPARD_OK;
    if (mkdir(copy, 0755) != 0 && errno != EEXIST)
        rc = gp_fail(err, GEPARD_ERR_IO, "%s: cannot create directory: %s", copy, strerror(errno));
    free(copy);
    return rc;
}

/* Where a write to `path` should land: the path itself, or the file a
 * symbolic link points to (so the rename replaces that file, not the link).
 * Sets *in_place for an existing target that is not a regular file. */
static char *atomic_target(const char *path, bool *in_place) {
    struct stat st;
    *in_place = false;
    if (stat(path, &st) != 0) return strdup(path); /* new file (or a dangling link) */
    if (!S_ISREG(st.st_mode)) {
        *in_place = true;
        return strdup(path);
    }
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        char *real = realpath(path, NULL);
        if (real) return real;
    }
    return strdup(path);
}

static int atomic_open_in_place(gp_atomic_file *af, gp_error *err) {
    int fd = open(af->target, O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        gp_fail(err, GEPARD_ERR_IO, "%s: cannot open for writing: %s", af->final_path, strerror(e));
        gp_atomic_file_abort(af);
        return GEPARD_ERR_IO;
    }
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        int e = errno;
        close(fd);
        gp_atomic_file_abort(af);
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot open output stream: %s", af->final_path,
                       strerror(e));
    }
    af->seekable = false;
    return GEPARD_OK;
}

int gp_atomic_file_open(gp_atomic_file *af, const char *path, gp_error *err) {
    memset(af, 0, sizeof *af);
    bool in_place = false;
    af->final_path = strdup(path);
    af->target = atomic_target(path, &in_place);
    if (!af->final_path || !af->target) {
        gp_atomic_file_abort(af);
        return gp_fail_oom(err, "path", strlen(path));
    }
    if (in_place) return atomic_open_in_place(af, err);
    const char *base = gp_path_basename(af->target);
    size_t dir_len = (size_t)(base - af->target);
    size_t temp_len = strlen(af->target) + 32;
    af->temp_path = malloc(temp_len);
    if (!af->temp_path) {
        gp_atomic_file_abort(af);
        return gp_fail_oom(err, "path", temp_len);
    }
    snprintf(af->temp_path, temp_len, "%.*s.%s.XXXXXX", (int)dir_len, af->target, base);
    int fd = mkstemp(af->temp_path);
    if (fd < 0) {
        int e = errno;
        gp_fail(err, GEPARD_ERR_IO, "%s: cannot create output file: %s", path, strerror(e));
        free(af->temp_path);
        af->temp_path = NULL;
        gp_atomic_file_abort(af);
        return GEPARD_ERR_IO;
    }
    fchmod(fd, 0644);
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        int e = errno;
        close(fd);
        gp_atomic_file_abort(af);
        return gp_fail(err, GEPARD_ERR_IO, "%s: cannot open output stream: %s", path, strerror(e));
    }
    af->seekable = true;
    return GEPARD_OK;
}

int gp_atomic_file_write(gp_atomic_file *af, const void *data, size_t len) {
    if (af->error) return -1;
    if (len == 0) return 0;
    errno = 0;
    if (fwrite(data, 1, len, af->fp) != len) {
        af->error = errno ? errno : EIO;
        return -1;
    }
    return 0;
}

int gp_atomic_file_seek(gp_atomic_file *af, long long offset) {
    if (af->error) return -1;
    if (!af->seekable) {
        af->error = ESPIPE;
        return -1;
    }
    errno = 0;
    if (fseeko(af->fp, (off_t)offset, SEEK_SET) != 0) { /* flushes: a late write error */
        af->error = errno ? errno : EIO;
        return -1;
    }
    return 0;
}

/* Flush and close, keeping the first error. */
static void atomic_close(gp_atomic_file *af) {
    errno = 0;
    if (fflush(af->fp) != 0 && !af->error) af->error = errno ? errno : EIO;
    if (ferror(af->fp) && !af->error) af->error = EIO;
    /* fsync makes "renamed" mean "on disk"; devices and pipes have nothing to sync. */
    if (af->temp_path && !af->error && fsync(fileno(af->fp)) != 0) af->error = errno;
    errno = 0;
    if (fclose(af->fp) != 0 && !af->error) af->error = errno ? errno : EIO;
    af->fp = NULL;
}

int gp_atomic_file_commit(gp_atomic_file *af, gp_error *err) {
    atomic_close(af);
    int rc = GEPARD_OK;
    if (af->error)
        rc = gp_fail(err, GEPARD_ERR_IO, "%s: cannot write: %s%s", af->final_path,
                     strerror(af->error),
                     af->error == ENOSPC || af->error == EDQUOT
                         ? " — free some space or write somewhere else"
                         : "");
    else if (af->temp_path && rename(af->temp_path, af->target) != 0)
        rc = gp_fail(err, GEPARD_ERR_IO, "%s: cannot move output into place: %s", af->final_path,
                     strerror(errno));
    if (rc != GEPARD_OK) {
        gp_atomic_file_abort(af);
        return rc;
    }
    free(af->temp_path);
    free(af->final_path);
    free(af->target);
    af->temp_path = af->final_path = af->target = NULL;
    return GEPARD_OK;
}

void gp_atomic_file_abort(gp_atomic_file *af) {
    if (af->fp) fclose(af->fp);
    af->fp = NULL;
    if (af->temp_path) unlink(af->temp_path);
    free(af->temp_path);
    free(af->final_path);
    free(af->target);
    af->temp_path = af->final_path = af->target = NULL;
}
