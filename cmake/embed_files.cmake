# Writes OUT, a C file holding each of FILES (a ;-list of paths under DIR) as a byte array,
# and a table of them by their path: the web console's files compiled into mqrd
# (heads/http/console.c), so that it needs no files at run time.
#   cmake -DDIR=... -DFILES=a;b -DOUT=... -P embed_files.cmake
set(text "/* Made by cmake/embed_files.cmake from ${DIR}: do not edit. */\n#include <stddef.h>\n\n")
set(table "")
set(i 0)
foreach(f ${FILES})
  file(READ "${DIR}/${f}" hex HEX)
  string(LENGTH "${hex}" n)
  math(EXPR size "${n} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND text "static const unsigned char file_${i}[] = {${bytes}0};\n")
  string(APPEND table "    {\"/${f}\", file_${i}, ${size}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND text "\nconst struct mqr__console_file { const char *path; const unsigned char *bytes; size_t len; } mqr__console_files[] = {\n${table}    {NULL, NULL, 0}};\n")
file(WRITE "${OUT}.tmp" "${text}")
file(RENAME "${OUT}.tmp" "${OUT}")
