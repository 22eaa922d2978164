-- expect: error_no_place.lua:3: stop here
-- error(msg, 0) adds no place; the message gets the line that raised it
error("stop here", 0)
