/*
 * 3x3 complex matrix algebra for the su3_rmd proxy.
 *
 * The FLOPS_* constants count real floating-point operations of each routine
 * (complex multiply = 6, complex add = 2); the totals in su3_rmd.c are built
 * from them, so the stated Gflop/s follows the code, not a guess.
 * Compile with -fcx-limited-range: otherwise gcc routes every complex
 * product through a NaN-checking library call.
 */
#ifndef SU3_H
#define SU3_H

#include <complex.h>
#include <math.h>

typedef struct { double complex e[3][3]; } su3;

#define FLOPS_MATMUL 198 /* 27 complex mul + 18 complex add */
#define FLOPS_MATADD 18
#define FLOPS_MATSCALE 18 /* real scalar times matrix */

static inline void su3_unit(su3 *a)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            a->e[i][j] = (i == j) ? 1.0 : 0.0;
}

static inline void su3_zero(su3 *a)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            a->e[i][j] = 0.0;
}

/* c = a b */
static inline void su3_mul_nn(const su3 *a, const su3 *b, su3 *c)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            c->e[i][j] = a->e[i][0] * b->e[0][j] + a->e[i][1] * b->e[1][j]
                       + a->e[i][2] * b->e[2][j];
}

/* c = a b^+ */
static inline void su3_mul_na(const su3 *a, const su3 *b, su3 *c)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            c->e[i][j] = a->e[i][0] * conj(b->e[j][0])
                       + a->e[i][1] * conj(b->e[j][1])
                       + a->e[i][2] * conj(b->e[j][2]);
}

/* c = a^+ b */
static inline void su3_mul_an(const su3 *a, const su3 *b, su3 *c)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            c->e[i][j] = conj(a->e[0][i]) * b->e[0][j]
                       + conj(a->e[1][i]) * b->e[1][j]
                       + conj(a->e[2][i]) * b->e[2][j];
}

/* c += a */
static inline void su3_add(su3 *c, const su3 *a)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            c->e[i][j] += a->e[i][j];
}

/* Re Tr(a b^+) = sum Re(a_ij conj(b_ij)): 9 x (2 mul + 1 add) + 8 adds */
#define FLOPS_RETRACE_NA 35
static inline double su3_retrace_na(const su3 *a, const su3 *b)
{
    double s = 0.0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            s += creal(a->e[i][j]) * creal(b->e[i][j])
               + cimag(a->e[i][j]) * cimag(b->e[i][j]);
    return s;
}

/*
 * p -= c * TA(m), TA = traceless anti-hermitian part (m - m^+)/2 - tr/3.
 * About 18 flops for TA and 36 for the scaled subtraction.
 */
#define FLOPS_TA_UPDATE 54
static inline void su3_sub_ta(su3 *p, double c, const su3 *m)
{
    double tr = (cimag(m->e[0][0]) + cimag(m->e[1][1]) + cimag(m->e[2][2])) / 3.0;
    for (int i = 0; i < 3; i++) {
        p->e[i][i] -= c * I * (cimag(m->e[i][i]) - tr);
        for (int j = i + 1; j < 3; j++) {
            double complex t = 0.5 * (m->e[i][j] - conj(m->e[j][i]));
            p->e[i][j] -= c * t;
            p->e[j][i] += c * conj(t);
        }
    }
}

/*
 * r = exp(a) by a Taylor series of TAYLOR_TERMS terms in Horner form:
 * r = 1 + a(1 + a/2(1 + ... (1 + a/n))). For |a| ~ 0.1 the error of 8 terms
 * is ~1e-15; reunitarisation afterwards removes what is left.
 */
#define TAYLOR_TERMS 8
#define FLOPS_EXP (FLOPS_MATSCALE + 3 + (TAYLOR_TERMS - 1) * (FLOPS_MATMUL + FLOPS_MATSCALE + 3))
static inline void su3_exp(const su3 *a, su3 *r)
{
    su3 t;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            r->e[i][j] = a->e[i][j] / TAYLOR_TERMS + (i == j);
    for (int k = TAYLOR_TERMS - 1; k >= 1; k--) {
        su3_mul_nn(a, r, &t);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                r->e[i][j] = t.e[i][j] / k + (i == j);
    }
}

/*
 * Project back onto SU(3): Gram-Schmidt on rows 0 and 1, row 2 is the
 * complex conjugate of their cross product (unitary, determinant 1).
 */
#define FLOPS_REUNIT 124
static inline void su3_reunit(su3 *u)
{
    double complex *r0 = u->e[0], *r1 = u->e[1], *r2 = u->e[2];
    double n = 0.0;
    for (int j = 0; j < 3; j++)
        n += creal(r0[j]) * creal(r0[j]) + cimag(r0[j]) * cimag(r0[j]);
    n = 1.0 / sqrt(n);
    for (int j = 0; j < 3; j++)
        r0[j] *= n;
    double complex d = 0.0;
    for (int j = 0; j < 3; j++)
        d += conj(r0[j]) * r1[j];
    for (int j = 0; j < 3; j++)
        r1[j] -= d * r0[j];
    n = 0.0;
    for (int j = 0; j < 3; j++)
        n += creal(r1[j]) * creal(r1[j]) + cimag(r1[j]) * cimag(r1[j]);
    n = 1.0 / sqrt(n);
    for (int j = 0; j < 3; j++)
        r1[j] *= n;
    r2[0] = conj(r0[1] * r1[2] - r0[2] * r1[1]);
    r2[1] = conj(r0[2] * r1[0] - r0[0] * r1[2]);
    r2[2] = conj(r0[0] * r1[1] - r0[1] * r1[0]);
}

/* max over elements of |(u u^+ - 1)_ij| */
static inline double su3_unitarity_dev(const su3 *u)
{
    su3 p;
    double m = 0.0;
    su3_mul_na(u, u, &p);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double v = cabs(p.e[i][j] - (i == j));
            if (v > m)
                m = v;
        }
    return m;
}

#endif
