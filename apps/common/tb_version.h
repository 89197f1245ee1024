/* The MPI library's own name for itself, one source for every program of apps/. */
#ifndef TB_VERSION_H
#define TB_VERSION_H
#include <stddef.h>

/* First line of MPI_Get_library_version with runs of white space made single
 * spaces; "LAM/MPI <LAM_VERSION>" on LAM (MPI-1: no such call); "unknown" on
 * another library older than MPI 3. Plain text: see tb_json_escape. */
void tb_library_version(char *out, size_t len);

/* `in` as the body of a JSON string (quotes, backslashes, control characters
 * escaped), truncated to fit `len`. */
void tb_json_escape(const char *in, char *out, size_t len);

#endif
