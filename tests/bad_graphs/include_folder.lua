-- expect: include_folder.lua:2: include: tests/bad_graphs/. is a folder, not a file
include "."
