-- expect: include_missing.lua:2: include: cannot open no_such_graph.lua: no such file below tests/bad_graphs (mmc compile -I DIR adds a folder)
include "no_such_graph.lua"
