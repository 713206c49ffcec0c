/*
 * cli.h: subcommands of the proflink command line that live outside main.c.
 */
#ifndef PL_PIPELINE_CLI_H
#define PL_PIPELINE_CLI_H

/* `proflink components [TYPE] [--format text|man]`: argv holds what follows
 * the word "components". Exit code. */
int pl_cli_components(int argc, char **argv);

#endif
