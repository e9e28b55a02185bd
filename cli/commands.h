/* The `mqr` tool's command groups, one file each. Each takes argv from the group's name
 * on and returns the process's exit code. */
#ifndef MQR_CLIENT_COMMANDS_H
#define MQR_CLIENT_COMMANDS_H

int mqr_cmd_schema(int argc, char **argv);
int mqr_cmd_avro(int argc, char **argv);
int mqr_cmd_send(int argc, char **argv);
int mqr_cmd_recv(int argc, char **argv);
int mqr_cmd_stat(int argc, char **argv);

#endif
