-- expect: include_device.lua:3: include: /dev/zero is /dev/zero, outside the folders a graph file may read
-- a device would never end (and a FIFO never start): neither is below the graph's folder
include "/dev/zero"
