/* embedded: the text files mmc carries inside its binary (templates/, graphs/policies/),
 * made at build time by tools/embed.c. */
#ifndef MMC_EMBEDDED_H
#define MMC_EMBEDDED_H

typedef struct EmbeddedFile {
    const char *path; /* as in the source tree: "templates/rope.cu" */
    const char *text;
} EmbeddedFile;

extern const EmbeddedFile embedded_files[]; /* ends with {0, 0} */

#endif
