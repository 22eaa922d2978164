-- expect: include_outside.lua:4: include:
-- expect: is /etc/passwd, outside the folders a graph file may read
-- expect: mmc compile -I DIR adds one
include "../../../../../../../../../../etc/passwd"
