#include "cli.h"
#include "util.h"
int cmd_train(int argc, char **argv) { (void)argc, (void)argv; die("train: not yet"); }
