/*
 * cmd_exporter -- tdax exporter: the device's metrics (tdax metrics) served
 * over HTTP for Prometheus to scrape, on loopback unless told otherwise.
 */
#ifndef TDAX_CLI_CMD_EXPORTER_H
#define TDAX_CLI_CMD_EXPORTER_H

int cmd_exporter(int argc, char **argv);

#endif
