/* The persistence section: the journal that keeps durable messages (docs/durability.md),
 * with the names and meanings of Artemis's broker.xml settings where they share them. */

#include <unistd.h>

#include "config_int.h"

void mqr__cfg_persistence_defaults(mqr_persistence_config_t *p) {
  *p = (mqr_persistence_config_t){.enabled = false,
                                  .directory = NULL,
                                  .journal_file_size = (size_t)10 << 20,
                                  .journal_min_files = 2,
                                  .journal_pool_files = 0,
                                  .journal_buffer_timeout_ns = 0,
                                  .journal_buffer_size = (size_t)490 << 10,
                                  .journal_sync = true,
                                  .journal_compact_min_files = 10,
                                  .journal_compact_percentage = 30};
}

void mqr__cfg_parse_persistence(ctx_t *c, yaml_node_t *map) {
  mqr_persistence_config_t *pc = &c->cfg->persistence;
  pc->enabled = true; /* the section turns it on; enabled: false turns it off again */
  pc->line = (uint32_t)map->start_mark.line + 1;
  pc->column = (uint32_t)map->start_mark.column + 1;
  if (mqr__cfg_is_null(map)) return;
  if (!mqr__cfg_want(c, map, YAML_MAPPING_NODE, "persistence")) return;
  static const char known[] = "enabled, directory, journal-file-size, journal-min-files, journal-pool-files, "
                              "journal-buffer-timeout, journal-buffer-size, journal-sync, journal-compact-min-files, "
                              "journal-compact-percentage";
  FOREACH_PAIR(c, map, p) {
    if (!mqr__cfg_key(c, map, p_it, &p, "persistence")) continue;
    int64_t v;
    if (mqr_str_eq(p.name, MQR_STR("enabled"))) {
      mqr__cfg_get_bool(c, &p, &pc->enabled);
    } else if (mqr_str_eq(p.name, MQR_STR("directory"))) {
      mqr_str_t d;
      if (!mqr__cfg_get_string(c, &p, &d)) continue;
      if (d.len == 0 || memchr(d.ptr, 0, d.len)) {
        ERR(c, p.value, "'directory' must name a directory");
        continue;
      }
      mqr_free(c->cfg->persistence_dir);
      c->cfg->persistence_dir = mqr__cfg_dup_n(c, d.ptr, d.len);
      pc->directory = c->cfg->persistence_dir;
    } else if (mqr_str_eq(p.name, MQR_STR("journal-file-size"))) {
      if (mqr__cfg_get_int(c, &p, true, 4096, (int64_t)1 << 30, &v)) pc->journal_file_size = (size_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("journal-min-files"))) {
      if (mqr__cfg_get_int(c, &p, false, 1, 100000, &v)) pc->journal_min_files = (uint32_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("journal-pool-files"))) {
      if (mqr__cfg_get_int(c, &p, false, -1, 100000, &v)) {
        if (v == 0)
          ERR(c, p.value, "'journal-pool-files' must be at least 1, or -1 for no limit");
        else
          pc->journal_pool_files = v < 0 ? 0 : (uint32_t)v;
      }
    } else if (mqr_str_eq(p.name, MQR_STR("journal-buffer-timeout"))) {
      if (mqr__cfg_get_int(c, &p, false, 0, 1000000000, &v)) pc->journal_buffer_timeout_ns = (uint64_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("journal-buffer-size"))) {
      if (mqr__cfg_get_int(c, &p, true, 4096, (int64_t)256 << 20, &v)) pc->journal_buffer_size = (size_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("journal-sync"))) {
      mqr__cfg_get_bool(c, &p, &pc->journal_sync);
    } else if (mqr_str_eq(p.name, MQR_STR("journal-compact-min-files"))) {
      if (mqr__cfg_get_int(c, &p, false, 0, 100000, &v)) pc->journal_compact_min_files = (uint32_t)v;
    } else if (mqr_str_eq(p.name, MQR_STR("journal-compact-percentage"))) {
      if (mqr__cfg_get_int(c, &p, false, 0, 100, &v)) pc->journal_compact_percentage = (uint32_t)v;
    } else {
      mqr__cfg_unknown_key(c, &p, "persistence", known);
    }
  }
  if (pc->enabled && pc->directory == NULL)
    mqr__cfg_diag_at(c, 0, map, "persistence has no directory: mqrd needs --data-dir, an embedder a data_dir");
}

const mqr_persistence_config_t *mqr_config_persistence(const mqr_config_t *cfg) { return &cfg->persistence; }

uint32_t mqr_config_expiry_scan_ms(const mqr_config_t *cfg) { return (uint32_t)cfg->expiry_scan_ms; }

int64_t mqr_config_global_max_size(const mqr_config_t *cfg) {
  if (cfg->global_max_size) return cfg->global_max_size;
  /* Artemis's default is half the JVM's heap, whose own default is a quarter of the
   * machine's memory: an eighth of it. */
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || size <= 0) return -1;
  return (int64_t)pages * size / 8;
}

const mqr_log_config_t *mqr_config_log(const mqr_config_t *cfg) { return &cfg->log; }
