/* xhpl: the panels' time inside MPI over memcpy (panel_time.c says how and why). */
#ifndef PANEL_TIME_H
#define PANEL_TIME_H

#include <mpi.h>

/* Collective over comm: rank 0 prints HPL-PANELS. Call after HPL, before MPI_Finalize. */
void panel_time_report(MPI_Comm comm);

#endif
