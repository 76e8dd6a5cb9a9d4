/*
 * elf_join.c: several relocatable ELF objects joined into one, as `ld -r`
 * joins them, for a file whose roots were compiled in groups on several
 * threads (codegen_groups.c): `kjit build --emit=obj` and the cache hand out
 * one object.
 *
 * The objects are LLVM's own (ELF64, little-endian, RELA relocations): each
 * section joins the output section of its name, type and flags, at its
 * alignment after the pieces of the objects before it; symbols and
 * relocations move with their sections. Local symbols stay each object's
 * (two groups may both have an internal copy of a device function); a
 * global defined in two objects is refused, but for zero-initialised data of
 * one size (the print hook, kjit_backend.h, which every group that prints
 * defines), which is one variable, as C's common symbols are. What this does
 * not know (COMDAT groups, REL relocations, sections linked to others) is
 * refused with a message, never joined wrongly. The output depends only on
 * the objects and their order.
 */
#include "codegen_llvm.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#ifndef SHT_LLVM_ADDRSIG
#define SHT_LLVM_ADDRSIG 0x6fff4c03
#endif

typedef struct Bytes {
    unsigned char *data;
    size_t size, cap;
} Bytes;

static void bytes_put(Bytes *b, const void *data, size_t n)
{
    if (b->size + n > b->cap) {
        b->cap = (b->size + n) * 2 + 64;
        b->data = kj_xrealloc(b->data, b->cap);
    }
    if (data)
        memcpy(b->data + b->size, data, n);
    else
        memset(b->data + b->size, 0, n);
    b->size += n;
}

static void bytes_pad(Bytes *b, uint64_t align)
{
    if (align > 1 && b->size % align)
        bytes_put(b, NULL, (size_t)(align - b->size % align));
}

/* A string table: offset 0 is the empty string. */
static uint32_t strtab_add(Bytes *t, const char *s)
{
    if (t->size == 0)
        bytes_put(t, "", 1);
    if (!*s)
        return 0;
    uint32_t at = (uint32_t)t->size;
    bytes_put(t, s, strlen(s) + 1);
    return at;
}

/* One output section other than the symbol and string tables. */
typedef struct OutSection {
    const char *name;
    uint32_t type;
    uint64_t flags, align, entsize;
    Bytes data;       /* NOBITS: size only */
    uint64_t size;
    Bytes rela;       /* Elf64_Rela against it, joined */
    uint32_t rela_flags;
    int index;        /* in the output's section headers */
    int rela_index;
    int symbol;       /* its STT_SECTION symbol */
} OutSection;

typedef struct InObject {
    const unsigned char *data;
    size_t size;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    int shnum;
    const char *shstr;
    size_t shstr_size;
    const Elf64_Sym *syms;
    int nsyms;
    const char *symstr;
    size_t symstr_size;
    int *out;          /* per section: its OutSection, -1 when none */
    uint64_t *offset;  /* per section: where its piece starts in that section */
    int *symbol;       /* per symbol: the output symbol */
} InObject;

typedef struct Join {
    InObject *in;
    int count;
    OutSection *sec;
    int sec_count, sec_cap;
    Elf64_Sym *syms;   /* output symbols; st_name is an index into names until written */
    const char **sym_names;
    int sym_count, sym_cap;
    char *error;
} Join;

static bool refuse(Join *j, int object, const char *what)
{
    if (!j->error) {
        KjBuf b = {0};
        kj_buf_printf(&b, "joining the compiled groups' objects: object %d %s", object + 1, what);
        j->error = b.data;
    }
    return false;
}

static const char *str_at(const char *table, size_t size, uint32_t at)
{
    if (at >= size || !memchr(table + at, '\0', size - at))
        return NULL;
    return table + at;
}

static bool in_bounds(const InObject *o, uint64_t offset, uint64_t size)
{
    return offset <= o->size && size <= o->size - offset;
}

/* Reads and checks one object's headers, symbol table and names. */
static bool read_object(Join *j, int k, const unsigned char *data, size_t size)
{
    InObject *o = &j->in[k];
    o->data = data;
    o->size = size;
    o->eh = (const Elf64_Ehdr *)data;
    const Elf64_Ehdr *eh = o->eh;
    if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
        eh->e_type != ET_REL || eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shnum == 0 ||
        eh->e_shstrndx >= eh->e_shnum ||
        !in_bounds(o, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)) ||
        eh->e_shoff % 8)
        return refuse(j, k, "is not a relocatable ELF64 little-endian object");
    if (k > 0 && (eh->e_machine != j->in[0].eh->e_machine || eh->e_flags != j->in[0].eh->e_flags))
        return refuse(j, k, "is for another machine than the first");
    o->sh = (const Elf64_Shdr *)(data + eh->e_shoff);
    o->shnum = eh->e_shnum;
    for (int s = 1; s < o->shnum; s++)
        if (o->sh[s].sh_type != SHT_NOBITS && !in_bounds(o, o->sh[s].sh_offset, o->sh[s].sh_size))
            return refuse(j, k, "has a section outside the file");
    const Elf64_Shdr *names = &o->sh[eh->e_shstrndx];
    o->shstr = (const char *)data + names->sh_offset;
    o->shstr_size = names->sh_size;
    int symtab = -1;
    for (int s = 1; s < o->shnum; s++) {
        if (!str_at(o->shstr, o->shstr_size, o->sh[s].sh_name))
            return refuse(j, k, "has a section without a name");
        if (o->sh[s].sh_type == SHT_SYMTAB) {
            if (symtab >= 0)
                return refuse(j, k, "has two symbol tables");
            symtab = s;
        }
    }
    if (symtab < 0)
        return refuse(j, k, "has no symbol table");
    const Elf64_Shdr *st = &o->sh[symtab];
    if (st->sh_entsize != sizeof(Elf64_Sym) || st->sh_size % sizeof(Elf64_Sym) ||
        st->sh_link == 0 || st->sh_link >= (uint32_t)o->shnum ||
        o->sh[st->sh_link].sh_type != SHT_STRTAB || st->sh_offset % 8)
        return refuse(j, k, "has a malformed symbol table");
    o->syms = (const Elf64_Sym *)(data + st->sh_offset);
    o->nsyms = (int)(st->sh_size / sizeof(Elf64_Sym));
    o->symstr = (const char *)data + o->sh[st->sh_link].sh_offset;
    o->symstr_size = o->sh[st->sh_link].sh_size;
    for (int i = 1; i < o->nsyms; i++)
        if (!str_at(o->symstr, o->symstr_size, o->syms[i].st_name))
            return refuse(j, k, "has a symbol without a name");
    o->out = kj_xcalloc((size_t)o->shnum, sizeof *o->out);
    o->offset = kj_xcalloc((size_t)o->shnum, sizeof *o->offset);
    o->symbol = kj_xcalloc((size_t)o->nsyms, sizeof *o->symbol);
    return true;
}

static int find_section(Join *j, const char *name, const Elf64_Shdr *s)
{
    for (int i = 0; i < j->sec_count; i++) {
        OutSection *o = &j->sec[i];
        if (strcmp(o->name, name) == 0 && o->type == s->sh_type && o->flags == s->sh_flags &&
            o->entsize == s->sh_entsize)
            return i;
    }
    if (j->sec_count == j->sec_cap) {
        if (j->sec_count + 8 >= SHN_LORESERVE / 2)
            return -1;
        j->sec_cap = j->sec_cap * 2 + 8;
        j->sec = kj_xrealloc(j->sec, sizeof *j->sec * (size_t)j->sec_cap);
    }
    OutSection *o = &j->sec[j->sec_count];
    *o = (OutSection){.name = name, .type = s->sh_type, .flags = s->sh_flags,
                      .align = 1, .entsize = s->sh_entsize};
    return j->sec_count++;
}

/* Each object's sections that hold code or data, appended to theirs. */
static bool place_sections(Join *j, int k)
{
    InObject *o = &j->in[k];
    for (int s = 0; s < o->shnum; s++) {
        const Elf64_Shdr *h = &o->sh[s];
        o->out[s] = -1;
        if (s == 0 || h->sh_type == SHT_SYMTAB || h->sh_type == SHT_STRTAB ||
            h->sh_type == SHT_RELA || h->sh_type == SHT_LLVM_ADDRSIG)
            continue; /* rebuilt, moved with their sections, or (addrsig) optional */
        if (h->sh_type == SHT_REL || h->sh_type == SHT_GROUP || h->sh_type == SHT_SYMTAB_SHNDX ||
            (h->sh_flags & (SHF_GROUP | SHF_LINK_ORDER)) || h->sh_link != 0)
            return refuse(j, k, "has a section kind that joining does not handle");
        const char *name = o->shstr + h->sh_name;
        int i = find_section(j, name, h);
        if (i < 0)
            return refuse(j, k, "makes more sections than an object holds");
        OutSection *out = &j->sec[i];
        uint64_t align = h->sh_addralign ? h->sh_addralign : 1;
        if (align & (align - 1))
            return refuse(j, k, "has a section whose alignment is not a power of two");
        uint64_t at = (out->size + align - 1) / align * align;
        /* a gap in .eh_frame would read as its terminator */
        if (at != out->size && h->sh_type == SHT_X86_64_UNWIND)
            return refuse(j, k, "has an unwind table that does not end aligned");
        if (h->sh_type != SHT_NOBITS) {
            bytes_pad(&out->data, align);
            bytes_put(&out->data, o->data + h->sh_offset, h->sh_size);
        }
        o->out[s] = i;
        o->offset[s] = at;
        out->size = at + h->sh_size;
        if (align > out->align)
            out->align = align;
    }
    return true;
}

static int add_symbol(Join *j, const char *name, Elf64_Sym sym)
{
    if (j->sym_count == j->sym_cap) {
        j->sym_cap = j->sym_cap * 2 + 64;
        j->syms = kj_xrealloc(j->syms, sizeof *j->syms * (size_t)j->sym_cap);
        j->sym_names = kj_xrealloc(j->sym_names, sizeof *j->sym_names * (size_t)j->sym_cap);
    }
    j->syms[j->sym_count] = sym;
    j->sym_names[j->sym_count] = name;
    return j->sym_count++;
}

/* A symbol as it is in the output: its section's index and its offset there. */
static bool moved(Join *j, int k, const Elf64_Sym *in, Elf64_Sym *out)
{
    InObject *o = &j->in[k];
    *out = *in;
    if (in->st_shndx == SHN_UNDEF || in->st_shndx == SHN_ABS || in->st_shndx == SHN_COMMON)
        return true;
    if (in->st_shndx >= o->shnum || o->out[in->st_shndx] < 0)
        return refuse(j, k, "has a symbol in a section that joining does not handle");
    out->st_shndx = (uint16_t)(o->out[in->st_shndx] + 1); /* OutSection + 1 until written */
    out->st_value += o->offset[in->st_shndx];
    return true;
}

static bool zero_data(Join *j, const Elf64_Sym *s)
{
    return ELF64_ST_TYPE(s->st_info) == STT_OBJECT && s->st_shndx != SHN_UNDEF &&
           s->st_shndx < SHN_LORESERVE &&
           j->sec[s->st_shndx - 1].type == SHT_NOBITS;
}

/* The output's symbols: one per output section, every object's locals, then
 * the globals, each name once. */
static bool join_symbols(Join *j)
{
    add_symbol(j, "", (Elf64_Sym){0});
    for (int i = 0; i < j->sec_count; i++)
        j->sec[i].symbol = add_symbol(j, "", (Elf64_Sym){.st_info = ELF64_ST_INFO(STB_LOCAL, STT_SECTION),
                                                          .st_shndx = (uint16_t)(i + 1)});
    for (int k = 0; k < j->count; k++) {
        InObject *o = &j->in[k];
        for (int i = 1; i < o->nsyms; i++) {
            const Elf64_Sym *s = &o->syms[i];
            if (ELF64_ST_BIND(s->st_info) != STB_LOCAL)
                continue;
            if (ELF64_ST_TYPE(s->st_info) == STT_SECTION) {
                if (s->st_shndx >= o->shnum || o->out[s->st_shndx] < 0)
                    continue; /* a section not joined (none is referred to) */
                o->symbol[i] = j->sec[o->out[s->st_shndx]].symbol;
                continue;
            }
            Elf64_Sym out;
            if (!moved(j, k, s, &out))
                return false;
            o->symbol[i] = add_symbol(j, o->symstr + s->st_name, out);
        }
    }
    int first_global = j->sym_count;
    for (int k = 0; k < j->count; k++) {
        InObject *o = &j->in[k];
        for (int i = 1; i < o->nsyms; i++) {
            const Elf64_Sym *s = &o->syms[i];
            if (ELF64_ST_BIND(s->st_info) == STB_LOCAL)
                continue;
            const char *name = o->symstr + s->st_name;
            Elf64_Sym out;
            if (!moved(j, k, s, &out))
                return false;
            int found = -1;
            for (int g = first_global; g < j->sym_count && found < 0; g++)
                if (strcmp(j->sym_names[g], name) == 0)
                    found = g;
            if (found < 0) {
                o->symbol[i] = add_symbol(j, name, out);
                continue;
            }
            Elf64_Sym *had = &j->syms[found];
            o->symbol[i] = found;
            if (out.st_shndx == SHN_UNDEF)
                continue;
            if (had->st_shndx == SHN_UNDEF) {
                *had = out;
                continue;
            }
            if (!(zero_data(j, had) && zero_data(j, &out) && had->st_size == out.st_size)) {
                KjBuf b = {0};
                kj_buf_printf(&b, "defines %s, which an object before it defines too", name);
                refuse(j, k, b.data);
                kj_buf_free(&b);
                return false;
            }
        }
    }
    return true;
}

/* Each object's relocations, moved to the joined sections and symbols. */
static bool join_relocations(Join *j)
{
    for (int k = 0; k < j->count; k++) {
        InObject *o = &j->in[k];
        for (int s = 1; s < o->shnum; s++) {
            const Elf64_Shdr *h = &o->sh[s];
            if (h->sh_type != SHT_RELA)
                continue;
            if (h->sh_entsize != sizeof(Elf64_Rela) || h->sh_size % sizeof(Elf64_Rela) ||
                h->sh_info == 0 || h->sh_info >= (uint32_t)o->shnum)
                return refuse(j, k, "has a malformed relocation section");
            int target = o->out[h->sh_info];
            if (target < 0) {
                if (o->sh[h->sh_info].sh_type == SHT_LLVM_ADDRSIG)
                    continue;
                return refuse(j, k, "has relocations in a section that joining does not handle");
            }
            OutSection *out = &j->sec[target];
            out->rela_flags = (uint32_t)h->sh_flags;
            size_t n = h->sh_size / sizeof(Elf64_Rela);
            for (size_t r = 0; r < n; r++) {
                Elf64_Rela rela;
                memcpy(&rela, o->data + h->sh_offset + r * sizeof rela, sizeof rela);
                uint32_t sym = (uint32_t)ELF64_R_SYM(rela.r_info);
                if (sym >= (uint32_t)o->nsyms)
                    return refuse(j, k, "has a relocation against a symbol it does not have");
                const Elf64_Sym *in = &o->syms[sym];
                if (sym != 0 && ELF64_ST_TYPE(in->st_info) == STT_SECTION) {
                    if (in->st_shndx >= o->shnum || o->out[in->st_shndx] < 0)
                        return refuse(j, k, "has a relocation against a section not joined");
                    rela.r_addend += (int64_t)o->offset[in->st_shndx];
                }
                rela.r_offset += o->offset[h->sh_info];
                rela.r_info = ELF64_R_INFO((uint64_t)(sym ? o->symbol[sym] : 0),
                                           ELF64_R_TYPE(rela.r_info));
                bytes_put(&out->rela, &rela, sizeof rela);
            }
        }
    }
    return true;
}

/* The joined object: each section followed by its relocations, then the
 * symbol table and the two string tables. */
static char *write_object(Join *j, size_t *size)
{
    int next = 1;
    for (int i = 0; i < j->sec_count; i++) {
        j->sec[i].index = next++;
        j->sec[i].rela_index = j->sec[i].rela.size ? next++ : 0;
    }
    int symtab = next++, strtab = next++, shstrtab = next++;
    int shnum = next;

    Bytes names = {0}, symnames = {0};
    strtab_add(&names, "");
    strtab_add(&symnames, "");
    int first_global = j->sym_count;
    for (int i = 1; i < j->sym_count; i++) {
        Elf64_Sym *s = &j->syms[i];
        if (ELF64_ST_BIND(s->st_info) != STB_LOCAL && i < first_global)
            first_global = i;
        s->st_name = strtab_add(&symnames, j->sym_names[i]);
        if (s->st_shndx != SHN_UNDEF && s->st_shndx < SHN_LORESERVE)
            s->st_shndx = (uint16_t)j->sec[s->st_shndx - 1].index;
    }

    Elf64_Shdr *sh = kj_xcalloc((size_t)shnum, sizeof *sh);
    Bytes file = {0};
    bytes_put(&file, NULL, sizeof(Elf64_Ehdr));
    for (int i = 0; i < j->sec_count; i++) {
        OutSection *o = &j->sec[i];
        bytes_pad(&file, o->align);
        sh[o->index] = (Elf64_Shdr){.sh_name = strtab_add(&names, o->name), .sh_type = o->type,
                                    .sh_flags = o->flags, .sh_offset = file.size,
                                    .sh_size = o->size, .sh_addralign = o->align,
                                    .sh_entsize = o->entsize};
        if (o->type != SHT_NOBITS)
            bytes_put(&file, o->data.data, o->data.size);
        if (o->rela_index) {
            KjBuf rname = {0};
            kj_buf_printf(&rname, ".rela%s", o->name);
            bytes_pad(&file, 8);
            sh[o->rela_index] = (Elf64_Shdr){
                .sh_name = strtab_add(&names, rname.data), .sh_type = SHT_RELA,
                .sh_flags = o->rela_flags, .sh_offset = file.size, .sh_size = o->rela.size,
                .sh_link = (uint32_t)symtab, .sh_info = (uint32_t)o->index, .sh_addralign = 8,
                .sh_entsize = sizeof(Elf64_Rela)};
            kj_buf_free(&rname);
            bytes_put(&file, o->rela.data, o->rela.size);
        }
    }
    bytes_pad(&file, 8);
    sh[symtab] = (Elf64_Shdr){.sh_name = strtab_add(&names, ".symtab"), .sh_type = SHT_SYMTAB,
                              .sh_offset = file.size,
                              .sh_size = sizeof(Elf64_Sym) * (uint64_t)j->sym_count,
                              .sh_link = (uint32_t)strtab, .sh_info = (uint32_t)first_global,
                              .sh_addralign = 8, .sh_entsize = sizeof(Elf64_Sym)};
    bytes_put(&file, j->syms, sizeof(Elf64_Sym) * (size_t)j->sym_count);
    sh[strtab] = (Elf64_Shdr){.sh_name = strtab_add(&names, ".strtab"), .sh_type = SHT_STRTAB,
                              .sh_offset = file.size, .sh_size = symnames.size, .sh_addralign = 1};
    bytes_put(&file, symnames.data, symnames.size);
    uint32_t shstr_name = strtab_add(&names, ".shstrtab");
    sh[shstrtab] = (Elf64_Shdr){.sh_name = shstr_name, .sh_type = SHT_STRTAB,
                                .sh_offset = file.size, .sh_size = names.size, .sh_addralign = 1};
    bytes_put(&file, names.data, names.size);
    bytes_pad(&file, 8);
    uint64_t shoff = file.size;
    bytes_put(&file, sh, sizeof *sh * (size_t)shnum);

    Elf64_Ehdr eh = *j->in[0].eh;
    eh.e_shoff = shoff;
    eh.e_shnum = (uint16_t)shnum;
    eh.e_shstrndx = (uint16_t)shstrtab;
    eh.e_ehsize = sizeof eh;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_phoff = 0;
    eh.e_phnum = 0;
    eh.e_phentsize = 0;
    memcpy(file.data, &eh, sizeof eh);
    free(sh);
    free(names.data);
    free(symnames.data);
    *size = file.size;
    return (char *)file.data;
}

char *kj_elf_join(char *const *objects, const size_t *sizes, int count, size_t *size,
                  char **error)
{
    Join j = {.in = kj_xcalloc((size_t)count, sizeof(InObject)), .count = count};
    char *result = NULL;
    bool ok = count > 0;
    for (int k = 0; ok && k < count; k++)
        ok = read_object(&j, k, (const unsigned char *)objects[k], sizes[k]);
    for (int k = 0; ok && k < count; k++)
        ok = place_sections(&j, k);
    if (ok)
        ok = join_symbols(&j) && join_relocations(&j);
    if (ok)
        result = write_object(&j, size);
    else if (error)
        *error = j.error ? j.error : kj_xstrdup("joining the compiled groups' objects: no objects");
    else
        free(j.error);
    for (int k = 0; k < count; k++) {
        free(j.in[k].out);
        free(j.in[k].offset);
        free(j.in[k].symbol);
    }
    for (int i = 0; i < j.sec_count; i++) {
        free(j.sec[i].data.data);
        free(j.sec[i].rela.data);
    }
    free(j.sec);
    free(j.syms);
    free(j.sym_names);
    free(j.in);
    return result;
}
