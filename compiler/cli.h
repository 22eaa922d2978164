/* cli: the subcommands of `mmc`, each implemented beside the module it drives. Each takes
 * argv starting at the subcommand's name and returns the exit status. */
#ifndef MMC_CLI_H
#define MMC_CLI_H

int cmd_compile(int argc, char **argv);       /* compiler/compile_cli.c */
int cmd_check_kernels(int argc, char **argv); /* runtime/nvrtc.c */
int cmd_train(int argc, char **argv);         /* runtime/train_cli.c */
int cmd_tokens(int argc, char **argv);        /* runtime/tokens.c */
int cmd_export(int argc, char **argv);        /* runtime/checkpoint.c */
int cmd_step(int argc, char **argv);          /* runtime/step_cli.c */
int cmd_bench(int argc, char **argv);         /* runtime/bench.c */
int cmd_init(int argc, char **argv);          /* runtime/train_cli.c */
int cmd_tokenizer(int argc, char **argv);     /* tokenizer/tokenizer_cli.c */
int cmd_data(int argc, char **argv);          /* tokenizer/data_cli.c */
int cmd_plot(int argc, char **argv);          /* runtime/plot_cli.c */
int plot_available(void);                     /* gnuplot, which cmd_plot draws with, is here */
int cmd_eval(int argc, char **argv);          /* runtime/eval_cli.c */
int cmd_generate(int argc, char **argv);      /* runtime/generate_cli.c */
int cmd_compare(int argc, char **argv);       /* runtime/compare_cli.c */

#endif
