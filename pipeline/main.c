/*
 * main.c: the proflink command line.
 */
#include <stdio.h>

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "proflink: not built yet\n");
    return 1;
}
