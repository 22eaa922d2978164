/* filemap: see filemap.h. */
#include "filemap.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static const char *kind_of(mode_t m) {
    return S_ISDIR(m)    ? "a folder"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "a special file";
}

FileMap filemap_open(const char *path, const char *what) {
    struct stat st;
    if (stat(path, &st) != 0) die("%s: cannot open %s: %s", path, what, strerror(errno));
    if (!S_ISREG(st.st_mode)) die("%s: is %s; a %s must be a regular file", path, kind_of(st.st_mode), what);
    /* O_NONBLOCK: should a FIFO take the file's place after the stat, the open still returns
     * and the fstat below refuses it */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) die("%s: cannot open %s: %s", path, what, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        die("%s: changed while it was opened; a %s must be a regular file", path, what);
    }
    FileMap m = {NULL, (size_t)st.st_size};
    if (m.bytes) {
        void *p = mmap(NULL, m.bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            die("%s: cannot map %s: %s", path, what, strerror(e));
        }
        m.p = p;
    }
    close(fd);
    return m;
}

void filemap_close(FileMap *m) {
    if (m->p) munmap((void *)m->p, m->bytes);
    m->p = NULL, m->bytes = 0;
}
