/* The registered protocols and their listener blocks' options (mqr/config.h): where
 * each protocol's options sit in a listener's options array. */
#include "config_int.h"

#define MAX_PROTOCOLS 8

static const mqr_protocol_def_t *reg[MAX_PROTOCOLS];
static uint32_t base[MAX_PROTOCOLS], n_reg, n_opts;

int mqr_config_register_protocol(const mqr_protocol_def_t *def) {
  for (uint32_t i = 0; i < n_reg; i++) {
    if (reg[i] == def) return 0;
    if (strcmp(reg[i]->name, def->name) == 0 || (reg[i]->bit & def->bit)) return MQR_EINVAL;
  }
  if (n_reg == MAX_PROTOCOLS || n_opts + def->n_options > MQR_LISTENER_OPTIONS) return MQR_ELIMIT;
  base[n_reg] = n_opts;
  reg[n_reg++] = def;
  n_opts += def->n_options;
  return 0;
}

const mqr_protocol_def_t *mqr_config_protocol(uint32_t i) { return i < n_reg ? reg[i] : NULL; }

uint32_t mqr__cfg_option_base(const mqr_protocol_def_t *def) {
  for (uint32_t i = 0; i < n_reg; i++)
    if (reg[i] == def) return base[i];
  return MQR_LISTENER_OPTIONS; /* not registered */
}

int64_t mqr_listener_option(const mqr_listener_config_t *l, const mqr_protocol_def_t *def, uint32_t i) {
  uint32_t at = mqr__cfg_option_base(def) + i;
  return at < MQR_LISTENER_OPTIONS && i < def->n_options ? l->options[at] : 0;
}

/* Every registered option at its default. */
void mqr__cfg_options_default(int64_t *options) {
  memset(options, 0, MQR_LISTENER_OPTIONS * sizeof *options);
  for (uint32_t i = 0; i < n_reg; i++)
    for (uint32_t k = 0; k < reg[i]->n_options; k++) options[base[i] + k] = reg[i]->options[k].def;
}
