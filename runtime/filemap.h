/* filemap: a regular file mapped read-only, as the readers of token files and safetensors
 * take their input. Anything else (a FIFO, a folder, a device such as /dev/zero) is refused
 * before it is opened: reading one would block, fail late, or never end. */
#ifndef MMC_FILEMAP_H
#define MMC_FILEMAP_H

#include <stddef.h>

typedef struct FileMap {
    const unsigned char *p; /* NULL for an empty file */
    size_t bytes;
} FileMap;

/* dies naming the path and `what` the file was to be (a "token file", say) */
FileMap filemap_open(const char *path, const char *what);
void filemap_close(FileMap *m);

#endif
