/* The CRC-32 libraft checksums its log and snapshots with, fast (crc.c). */
#ifndef MQR_CLUSTER_CRC_H
#define MQR_CLUSTER_CRC_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32 of buf (polynomial 0x04C11DB7, most significant bit first, no reflection, no
 * final xor) continued from crc: libraft's byteCrc32, bit for bit. Any thread. */
uint32_t mqr__crc32_msb(const void *buf, size_t size, uint32_t crc);
/* Makes the tables (also done by the first mqr__crc32_msb). The cluster calls it when it
 * starts: that reference is also what links crc.c, and with it the byteCrc32 libraft's calls
 * reach, into a program built from the static libraries. */
void mqr__crc_init(void);

#endif
