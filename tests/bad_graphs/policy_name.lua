-- expect: policy_name.lua:3: policy: the name "my policy" has a space at character 3
loss(sum_all(param("w", {2}, "ones")))
policy { name = "my policy" }
