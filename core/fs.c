#include "fs.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

int hl_make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}
