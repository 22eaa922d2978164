/* cli: the subcommands of `mmc`, each implemented beside the module it drives. Each takes
 * argv starting at the subcommand's name and returns the exit status. */
#ifndef MMC_CLI_H
#define MMC_CLI_H

int cmd_compile(int argc, char **argv);       /* compiler/compile_cli.c */
int cmd_check_kernels(int argc, char **argv); /* runtime/nvrtc.c */
int cmd_train(int argc, char **argv);         /* runtime/train_cli.c */
int cmd_tokens(int argc, char **argv);        /* runtime/tokens.c */

#endif
