/* See tb_version.h. MPI-1 only where the library is older (LAM 7.1). */
#include <stdio.h>
#include <string.h>
#ifdef TB_PVM
#include <pvm3.h>      /* PVM programs (p2p-pvm) have no MPI */
#else
#include <mpi.h>
#endif
#include "tb_version.h"

void tb_library_version(char *out, size_t len)
{
    if (len == 0)
        return;
#if defined(TB_PVM)
    snprintf(out, len, "PVM %s", pvm_version()); /* the library's, asked at run time */
#elif defined(LAM_VERSION)
    snprintf(out, len, "LAM/MPI %s", LAM_VERSION); /* from lam_config.h via mpi.h */
#elif defined(MPI_VERSION) && MPI_VERSION >= 3
    static char raw[MPI_MAX_LIBRARY_VERSION_STRING];
    int rlen = 0;
    size_t k = 0;
    MPI_Get_library_version(raw, &rlen);
    /* The first line names library and version; MPICH goes on with its whole
     * configure line, which belongs in no table. */
    for (int i = 0; i < rlen && raw[i] && raw[i] != '\n' && k + 1 < len; i++) {
        int space = raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\r';
        if (!space)
            out[k++] = raw[i];
        else if (k > 0 && out[k - 1] != ' ')
            out[k++] = ' ';
    }
    while (k > 0 && out[k - 1] == ' ')
        k--;
    out[k] = '\0';
#else
    snprintf(out, len, "unknown");
#endif
}

void tb_json_escape(const char *in, char *out, size_t len)
{
    size_t k = 0;
    if (len == 0)
        return;
    for (; *in; in++) {
        unsigned char c = (unsigned char)*in;
        char esc[8];
        int n = c == '"' || c == '\\' ? snprintf(esc, sizeof esc, "\\%c", c)
              : c < 0x20 ? snprintf(esc, sizeof esc, "\\u%04x", c)
              : snprintf(esc, sizeof esc, "%c", c);
        if (k + (size_t)n + 1 > len)
            break; /* never half an escape */
        memcpy(out + k, esc, (size_t)n);
        k += (size_t)n;
    }
    out[k] = '\0';
}
