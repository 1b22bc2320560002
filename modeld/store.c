/*
 * The models modeld holds, on disk in Kepler's model-db layout
 * (<pipeline>/<source>/<OutputType>/<FeatureGroup>/<Trainer>_<N>/{weight,metadata}.json
 * plus node_type_index.json), and the answer to a model request. Files are
 * written with wb_json_save (atomic); an entry that cannot be read is skipped
 * and kept, with its path and reason, for GET /models.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "json.h"
#include "log.h"
#include "modeld.h"
#include "spec.h"
#include "state.h"

#define WATTBUS_TRAINER "SGDRegressorTrainer" /* a linear model, as Kepler names its trainer */

struct md_store *md_store_new(const char *dir, const char *pipeline, const char *source)
{
	struct md_store *self = calloc(1, sizeof *self);
	if (!self || !(self->dir = strdup(dir))) {
		free(self);
		return NULL;
	}
	snprintf(self->pipeline, sizeof self->pipeline, "%s", pipeline);
	snprintf(self->source, sizeof self->source, "%s", source);
	self->pol = (struct md_policy){
	    .max_models = SIZE_MAX,
	    .max_models_per_host = SIZE_MAX,
	    .max_node_types = SIZE_MAX,
	    .max_node_types_per_host = SIZE_MAX,
	    .max_bytes = UINT64_MAX,
	    .max_bytes_per_host = UINT64_MAX,
	    .max_hosts = SIZE_MAX,
	};
	snprintf(self->pol.apart, sizeof self->pol.apart, "%s-untrusted", pipeline);
	static char star[] = "*", *all[] = {star};
	self->pol.trusted = all;
	self->pol.ntrusted = 1;
	return self;
}

int md_store_policy(struct md_store *self, const struct md_policy *pol, char *err, size_t errlen)
{
	char **t = calloc(pol->ntrusted ? pol->ntrusted : 1, sizeof *t);
	for (size_t i = 0; t && i < pol->ntrusted; i++)
		if (!(t[i] = strdup(pol->trusted[i]))) {
			while (i--)
				free(t[i]);
			free(t);
			t = NULL;
		}
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!strcmp(pol->apart, self->pipeline)) {
		snprintf(err, errlen, "the untrusted pipeline cannot be the store's own (%s)",
			 self->pipeline);
		for (size_t i = 0; i < pol->ntrusted; i++)
			free(t[i]);
		free(t);
		return -1;
	}
	self->pol = *pol;
	self->pol.trusted = t;
	self->own_trusted = true;
	return 0;
}

/* dir/name into out; false when it does not fit. */
static bool join(char *out, size_t len, const char *dir, const char *name)
{
	int n = snprintf(out, len, "%s/%s", dir, name);
	return n >= 0 && (size_t)n < len;
}

static void model_free(struct md_model *m)
{
	if (!m)
		return;
	free(m->dir);
	free(m->archive);
	json_decref(m->meta);
	json_decref(m->weight);
	for (size_t i = 0; i < m->nfeat; i++)
		free(m->features[i]);
	free(m->features);
	free(m);
}

void md_store_destroy(struct md_store **self_p)
{
	if (!self_p || !*self_p)
		return;
	struct md_store *self = *self_p;
	for (size_t i = 0; i < self->nmodels; i++)
		model_free(self->models[i]);
	free(self->models);
	for (size_t i = 0; i < self->npipes; i++) {
		free(self->pipes[i].dir);
		json_decref(self->pipes[i].index);
		free(self->pipes[i].types);
	}
	free(self->pipes);
	for (size_t i = 0; i < self->nerrors; i++) {
		free(self->errors[i].path);
		free(self->errors[i].reason);
	}
	free(self->errors);
	if (self->own_trusted) {
		for (size_t i = 0; i < self->pol.ntrusted; i++)
			free(self->pol.trusted[i]);
		free(self->pol.trusted);
	}
	free(self->hosts);
	free(self->dir);
	free(self);
	*self_p = NULL;
}

static void add_error(struct md_store *self, const char *path, const char *reason)
{
	log_warnx("model store: %s: skipped (%s)", path, reason);
	self->skipped++;
	md_store_note_error(self, path, reason);
}

void md_store_note_error(struct md_store *self, const char *path, const char *reason)
{
	struct md_error *e = realloc(self->errors, (self->nerrors + 1) * sizeof *e);
	if (!e)
		return;
	self->errors = e;
	e[self->nerrors].path = strdup(path);
	e[self->nerrors].reason = strdup(reason);
	if (e[self->nerrors].path && e[self->nerrors].reason)
		self->nerrors++;
	else {
		free(e[self->nerrors].path);
		free(e[self->nerrors].reason);
	}
}

struct md_pipeline *md_store_pipeline(struct md_store *self, const char *name)
{
	for (size_t i = 0; i < self->npipes; i++)
		if (!strcmp(self->pipes[i].name, name))
			return &self->pipes[i];
	return NULL;
}

/* node_type_index.json -> types[] */
static int index_parse(struct md_pipeline *p, char *err, size_t errlen)
{
	free(p->types);
	p->types = NULL;
	p->ntypes = 0;
	if (!json_is_object(p->index)) {
		snprintf(err, errlen, "not a JSON object");
		return -1;
	}
	size_t n = json_object_size(p->index);
	p->types = calloc(n ? n : 1, sizeof *p->types);
	if (!p->types) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	const char *key;
	json_t *v;
	json_object_foreach(p->index, key, v)
	{
		int64_t idx;
		char why[MD_ERR_MAX];
		if (wb_parse_int(key, &idx) < 0 || idx < 0 || idx > INT_MAX) {
			snprintf(err, errlen, "node type \"%s\" is not a number", key);
			return -1;
		}
		struct md_node_type *t = &p->types[p->ntypes];
		t->index = (int)idx;
		if (km_spec_parse(json_object_get(v, "attrs"), KM_ZERO_UNKNOWN, &t->spec, why,
				  sizeof why) < 0) {
			snprintf(err, errlen, "node type %s: %s", key, why);
			return -1;
		}
		t->members = json_array_size(json_object_get(v, "members"));
		/* keep them in index order: Kepler walks its dict in that order */
		size_t i = p->ntypes++;
		while (i > 0 && p->types[i - 1].index > t->index) {
			struct md_node_type tmp = p->types[i - 1];
			p->types[i - 1] = p->types[i];
			p->types[i] = tmp;
			i--;
		}
	}
	return 0;
}

static struct md_pipeline *pipeline_add(struct md_store *self, const char *name, const char *dir,
					bool imported)
{
	struct md_pipeline *p = realloc(self->pipes, (self->npipes + 1) * sizeof *p);
	if (!p)
		return NULL;
	self->pipes = p;
	p = &self->pipes[self->npipes];
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "%s", name);
	p->imported = imported;
	if (!(p->dir = strdup(dir)))
		return NULL;
	char path[PATH_MAX], err[MD_ERR_MAX];
	snprintf(path, sizeof path, "%s/node_type_index.json", dir);
	p->index = wb_json_load(path, 0, err, sizeof err);
	if (!p->index) {
		if (errno != ENOENT)
			add_error(self, path, err);
		p->index = json_object();
	} else if (index_parse(p, err, sizeof err) < 0) {
		add_error(self, path, err);
		json_decref(p->index);
		p->index = json_object();
		free(p->types);
		p->types = NULL;
		p->ntypes = 0;
	}
	self->npipes++;
	return p;
}

static int cmp_models(const void *a, const void *b)
{
	const struct md_model *x = *(const struct md_model *const *)a,
			      *y = *(const struct md_model *const *)b;
	int c = strcmp(x->pipeline, y->pipeline);
	if (!c)
		c = strcmp(x->source, y->source);
	if (!c)
		c = strcmp(x->output, y->output);
	if (!c)
		c = strcmp(x->group, y->group);
	return c ? c : strcmp(x->name, y->name);
}

static void sort_models(struct md_store *self)
{
	qsort(self->models, self->nmodels, sizeof *self->models, cmp_models);
}

/* The size of the regular files directly in dir. */
static uint64_t folder_bytes(const char *dir)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, NULL);
	uint64_t sum = 0;
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];
		struct stat st;
		if (join(path, sizeof path, dir, ents[i]->d_name) && lstat(path, &st) == 0 &&
		    S_ISREG(st.st_mode))
			sum += (uint64_t)st.st_size;
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	return sum;
}

/* Fill m's derived fields from its metadata. 0, or -1 with err. */
static int model_from_meta(struct md_model *m, char *err, size_t errlen)
{
	const char *us = strrchr(m->name, '_');
	int64_t nt;
	if (!us || us == m->name || wb_parse_int(us + 1, &nt) < 0 || nt < 0 || nt > INT_MAX) {
		snprintf(err, errlen, "the folder name is not TRAINER_NODETYPE");
		return -1;
	}
	m->node_type = (int)nt;
	snprintf(m->trainer, sizeof m->trainer, "%.*s", (int)(us - m->name), m->name);
	if (!json_is_object(m->meta)) {
		snprintf(err, errlen, "metadata.json is not a JSON object");
		return -1;
	}
	const json_t *f = json_object_get(m->meta, "features");
	if (!json_is_array(f) || !json_array_size(f)) {
		snprintf(err, errlen, "metadata.json: features is not a list of names");
		return -1;
	}
	m->features = calloc(json_array_size(f), sizeof *m->features);
	if (!m->features) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	size_t i;
	const json_t *v;
	json_array_foreach(f, i, v)
	{
		if (!json_is_string(v)) {
			snprintf(err, errlen, "metadata.json: features[%zu] is not a string", i);
			return -1;
		}
		if (!(m->features[m->nfeat] = strdup(json_string_value(v)))) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		m->nfeat++;
	}
	const json_t *mae = json_object_get(m->meta, "mae");
	m->mae = json_is_number(mae) && json_number_value(mae) >= 0 ? json_number_value(mae) : NAN;
	if (m->weight && (!json_is_object(m->weight) || !json_object_size(m->weight))) {
		snprintf(err, errlen, "%s is not a JSON object of zones",
			 m->archive ? "the weight file beside the archive" : "weight.json");
		return -1;
	}
	return 0;
}

/*
 * A model of pipeline p: the folder dir (metadata.json, weight.json when it is
 * weight-capable, and whatever else the trainer wrote), or, when archive, the
 * published dir/<name>.zip (metadata.json inside) with its weight file
 * dir/<name>.json beside it when there is one (kepler-model-db's layout).
 */
static struct md_model *model_load(struct md_store *self, const struct md_pipeline *p,
				   const char *source, const char *output, const char *group,
				   const char *name, const char *dir, bool archive)
{
	struct md_model *m = calloc(1, sizeof *m);
	char path[PATH_MAX], err[MD_ERR_MAX], why[MD_ERR_MAX];
	if (!m || !(m->dir = strdup(dir))) {
		model_free(m);
		return NULL;
	}
	snprintf(m->pipeline, sizeof m->pipeline, "%s", p->name);
	snprintf(m->source, sizeof m->source, "%s", source);
	snprintf(m->output, sizeof m->output, "%s", output);
	snprintf(m->group, sizeof m->group, "%s", group);
	snprintf(m->name, sizeof m->name, "%s", name);
	if (archive) {
		if (snprintf(path, sizeof path, "%s/%s.zip", dir, name) >= (int)sizeof path ||
		    !(m->archive = strdup(path)))
			goto fail;
		if (!(m->meta = md_archive_metadata(path, err, sizeof err))) {
			add_error(self, path, err);
			goto fail;
		}
		snprintf(path, sizeof path, "%s/%s.json", dir, name);
	} else {
		if (!join(path, sizeof path, dir, "metadata.json"))
			goto fail;
		if (!(m->meta = wb_json_load(path, 0, err, sizeof err))) {
			add_error(self, path, err);
			goto fail;
		}
		if (!join(path, sizeof path, dir, "weight.json"))
			goto fail;
	}
	/* no weight file: an archive-only model (XGBoost, GradientBoosting, ...), served for
	 * weight=false only */
	if (!(m->weight = wb_json_load(path, 0, err, sizeof err)) && errno != ENOENT) {
		add_error(self, path, err);
		goto fail;
	}
	if (model_from_meta(m, why, sizeof why) < 0) {
		add_error(self, m->archive ? m->archive : dir, why);
		goto fail;
	}
	const char *host = km_meta_host(m->meta);
	if (!p->imported)
		snprintf(m->host, sizeof m->host, "%s", host);
	m->bytes = archive ? 0 : folder_bytes(dir);
	if (host[0])
		snprintf(m->origin, sizeof m->origin, "bus:%s", host);
	else
		snprintf(m->origin, sizeof m->origin, "%s:%s", p->imported ? "import" : "store",
			 p->dir);
	return m;
fail:
	model_free(m);
	return NULL;
}

static bool is_dir(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* What dir_names keeps of an entry: its name cut to len, or nothing (len 0). */
typedef size_t (*name_keep_fn)(const char *dir, const char *name, const void *arg);

/* The names dir's entries keep (their dot-files never), sorted (NULL-terminated; caller frees). */
static char **dir_names(const char *dir, name_keep_fn keep, const void *arg)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0)
		return NULL;
	char **out = calloc((size_t)n + 1, sizeof *out);
	size_t k = 0;
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		size_t len = out && name[0] != '.' ? keep(dir, name, arg) : 0;
		if (len)
			out[k++] = strndup(name, len);
		free(ents[i]);
	}
	free(ents);
	return out;
}

static size_t keep_dir(const char *dir, const char *name, const void *arg)
{
	(void)arg;
	char path[PATH_MAX];
	return join(path, sizeof path, dir, name) && is_dir(path) ? strlen(name) : 0;
}

/* The sub-folders of dir, sorted (NULL-terminated; caller frees). */
static char **subdirs(const char *dir)
{
	return dir_names(dir, keep_dir, NULL);
}

/* A <name>.zip file with no folder <name> among folders (arg): <name>. */
static size_t keep_archive(const char *dir, const char *name, const void *arg)
{
	char *const *folders = arg;
	size_t len = strlen(name);
	char path[PATH_MAX];
	struct stat st;
	if (len <= 4 || strcmp(name + len - 4, ".zip") != 0 || len - 4 >= MD_NAME_MAX ||
	    !join(path, sizeof path, dir, name) || lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	for (size_t f = 0; folders && folders[f]; f++)
		if (strlen(folders[f]) == len - 4 && !strncmp(folders[f], name, len - 4))
			return 0;
	return len - 4;
}

/* The names of dir's <name>.zip files that have no folder <name> among folders (an unpacked
 * archive is read from its folder, as Kepler's server does), sorted (NULL-terminated). */
static char **archives(const char *dir, char *const *folders)
{
	return dir_names(dir, keep_archive, folders);
}

static int add_model(struct md_store *self, struct md_model *m)
{
	struct md_model **v = realloc(self->models, (self->nmodels + 1) * sizeof *v);
	if (!v)
		return -1;
	self->models = v;
	self->models[self->nmodels++] = m;
	return 0;
}

static void migrate(struct md_model *m);

/* Walk <pipeline>/<source>/<output>/<group>/<model>/ */
static void pipeline_walk(struct md_store *self, const struct md_pipeline *p)
{
	char **sources = subdirs(p->dir);
	for (size_t s = 0; sources && sources[s]; s++) {
		char d1[PATH_MAX];
		if (!join(d1, sizeof d1, p->dir, sources[s]))
			continue;
		char **outputs = subdirs(d1);
		for (size_t o = 0; outputs && outputs[o]; o++) {
			char d2[PATH_MAX];
			if (!join(d2, sizeof d2, d1, outputs[o]))
				continue;
			if (strcmp(outputs[o], "AbsPower") && strcmp(outputs[o], "DynPower"))
				continue; /* Kepler's other folders (e.g. checkpoints) */
			char **groups = subdirs(d2);
			for (size_t g = 0; groups && groups[g]; g++) {
				char d3[PATH_MAX];
				if (!join(d3, sizeof d3, d2, groups[g]))
					continue;
				char **names = subdirs(d3);
				for (size_t n = 0; names && names[n]; n++) {
					char d4[PATH_MAX];
					if (!join(d4, sizeof d4, d3, names[n]))
						continue;
					if (!strcmp(names[n], "checkpoint"))
						continue;
					struct md_model *m =
					    model_load(self, p, sources[s], outputs[o], groups[g],
						       names[n], d4, false);
					if (m && !p->imported)
						migrate(m);
					if (m && add_model(self, m) < 0)
						model_free(m);
				}
				char **zips = archives(d3, names);
				for (size_t n = 0; zips && zips[n]; n++) {
					struct md_model *m =
					    model_load(self, p, sources[s], outputs[o], groups[g],
						       zips[n], d3, true);
					if (m && add_model(self, m) < 0)
						model_free(m);
				}
				strv_free(zips);
				strv_free(names);
			}
			strv_free(groups);
		}
		strv_free(outputs);
	}
	strv_free(sources);
	sort_models(self);
}

/* ---- trainer hosts: what each holds, for the budget ---- */
static int host_cmp(const void *key, const void *h)
{
	return strcmp(key, ((const struct md_host *)h)->name);
}

static struct md_host *host_find(struct md_store *self, const char *name)
{
	return self->nhosts
		   ? bsearch(name, self->hosts, self->nhosts, sizeof *self->hosts, host_cmp)
		   : NULL;
}

/* The host's entry, added when new. Past max_hosts, a host that holds nothing (only a rate)
 * makes room, the one heard from least recently; NULL when none does. */
static struct md_host *host_get(struct md_store *self, const char *name, uint64_t now_ns)
{
	struct md_host *h = host_find(self, name);
	if (h)
		return h;
	if (self->nhosts >= self->pol.max_hosts) {
		size_t victim = self->nhosts;
		for (size_t i = 0; i < self->nhosts; i++)
			if (!self->hosts[i].models && !self->hosts[i].types &&
			    (victim == self->nhosts ||
			     self->hosts[i].last_ns < self->hosts[victim].last_ns))
				victim = i;
		if (victim == self->nhosts)
			return NULL;
		memmove(&self->hosts[victim], &self->hosts[victim + 1],
			(self->nhosts - victim - 1) * sizeof *self->hosts);
		self->nhosts--;
	}
	struct md_host *v = realloc(self->hosts, (self->nhosts + 1) * sizeof *v);
	if (!v)
		return NULL;
	self->hosts = v;
	size_t at = 0;
	while (at < self->nhosts && strcmp(self->hosts[at].name, name) < 0)
		at++;
	memmove(&self->hosts[at + 1], &self->hosts[at], (self->nhosts - at) * sizeof *v);
	self->nhosts++;
	h = &self->hosts[at];
	memset(h, 0, sizeof *h);
	snprintf(h->name, sizeof h->name, "%s", name);
	h->tokens = self->pol.models_per_host_per_min;
	h->last_ns = now_ns;
	return h;
}

/* Charge what the bus's pipelines hold to their hosts (at load). */
static void account(struct md_store *self)
{
	self->bus_models = self->bus_types = 0;
	self->bus_bytes = 0;
	for (size_t i = 0; i < self->npipes; i++) {
		const struct md_pipeline *p = &self->pipes[i];
		if (p->imported)
			continue;
		self->bus_types += p->ntypes;
		const char *key;
		json_t *v;
		json_object_foreach(p->index, key, v)
		{
			size_t k;
			json_t *h;
			json_array_foreach(json_object_get(v, "members"), k, h)
			{
				struct md_host *mh = json_is_string(h)
							 ? host_get(self, json_string_value(h), 0)
							 : NULL;
				if (mh)
					mh->types++;
			}
		}
	}
	for (size_t i = 0; i < self->nmodels; i++) {
		struct md_model *m = self->models[i];
		const struct md_pipeline *p = md_store_pipeline(self, m->pipeline);
		if (!p || p->imported)
			continue;
		self->bus_models++;
		self->bus_bytes += m->bytes;
		struct md_host *h = m->host[0] ? host_get(self, m->host, 0) : NULL;
		if (h) {
			h->models++;
			h->bytes += m->bytes;
		}
	}
}

int md_store_load(struct md_store *self, char *err, size_t errlen)
{
	/* an existing store may be a link: systemd's StateDirectory= with DynamicUser= is one */
	struct stat st;
	if ((stat(self->dir, &st) < 0 || !S_ISDIR(st.st_mode)) &&
	    wb_state_mkdir(self->dir, err, errlen) < 0)
		return -1;
	char **pipes = subdirs(self->dir);
	if (!pipes) {
		snprintf(err, errlen, "%s: %s", self->dir, strerror(errno));
		return -1;
	}
	for (size_t i = 0; pipes[i]; i++) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s/%s", self->dir, pipes[i]);
		if (md_store_pipeline(self, pipes[i])) {
			add_error(self, dir, "a pipeline of this name is already held");
			continue;
		}
		struct md_pipeline *p = pipeline_add(self, pipes[i], dir, false);
		if (p) {
			p->apart = !strcmp(p->name, self->pol.apart);
			pipeline_walk(self, p);
		}
	}
	strv_free(pipes);
	account(self);
	return 0;
}

int md_store_import(struct md_store *self, const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX], why[MD_ERR_MAX];
	if (!is_dir(dir)) {
		snprintf(err, errlen, "import %s: not a directory", dir);
		return -1;
	}
	/* its name: metadata.json's name, else the folder's */
	snprintf(path, sizeof path, "%s/metadata.json", dir);
	json_t *meta = wb_json_load(path, 0, why, sizeof why);
	const char *base = strrchr(dir, '/');
	base = base && base[1] ? base + 1 : dir;
	char name[64];
	snprintf(name, sizeof name, "%s",
		 meta && wb_json_str(meta, "name")[0] ? wb_json_str(meta, "name") : base);
	json_decref(meta);
	/* the bus's pipelines are named by the config, whether they exist yet or not: an import
	 * of the same name would make every model from the bus go to a read-only pipeline */
	if (!strcmp(name, self->pipeline) || !strcmp(name, self->pol.apart)) {
		snprintf(
		    err, errlen,
		    "import %s: refused: its name %s is the one this store files models from the bus under (pipeline = %s, untrusted_pipeline = %s)",
		    dir, name, self->pipeline, self->pol.apart);
		return -1;
	}
	if (md_store_pipeline(self, name)) {
		snprintf(err, errlen, "import %s: refused: a pipeline named %s is already held",
			 dir, name);
		return -1;
	}
	size_t before = self->nmodels;
	struct md_pipeline *p = pipeline_add(self, name, dir, true);
	if (!p) {
		snprintf(err, errlen, "import %s: out of memory", dir);
		return -1;
	}
	pipeline_walk(self, p);
	log_info("imported pipeline %s from %s: %zu models", name, dir, self->nmodels - before);
	return 0;
}

/* ---- filing a model from the bus ---- */
static int mkdirs(const char *base, const char *const *parts, size_t n, char *out, size_t outlen,
		  char *err, size_t errlen)
{
	snprintf(out, outlen, "%s", base);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(out);
		snprintf(out + len, outlen - len, "/%s", parts[i]);
		if (wb_state_mkdir(out, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* The pipeline models from the bus are filed under (name: the own or the untrusted one),
 * created when missing. */
static struct md_pipeline *bus_pipeline(struct md_store *self, const char *name, bool apart,
					char *err, size_t errlen)
{
	struct md_pipeline *p = md_store_pipeline(self, name);
	if (p) {
		if (p->imported) { /* md_store_import refuses these names; kept as a guard */
			snprintf(err, errlen, "pipeline %s is an imported one (read-only)", name);
			return NULL;
		}
		return p;
	}
	char dir[PATH_MAX];
	const char *parts[] = {name};
	if (mkdirs(self->dir, parts, 1, dir, sizeof dir, err, errlen) < 0)
		return NULL;
	json_t *meta = json_pack("{s:s, s:s}", "name", name, "publisher", "wattbus-modeld");
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/metadata.json", dir);
	int rc = wb_json_save(meta, path, true, err, errlen);
	json_decref(meta);
	if (rc < 0)
		return NULL;
	if (!(p = pipeline_add(self, name, dir, false)))
		snprintf(err, errlen, "out of memory");
	else
		p->apart = apart;
	return p;
}

/* The node type of a trainer's spec: the covering one, or -1 (a new one is needed). *member:
 * host is among its members. Changes nothing. */
static int node_type_find(const struct md_pipeline *p, const struct km_spec *spec, const char *host,
			  bool *member)
{
	double sim;
	int nt = -1;
	*member = false;
	if (km_spec_empty(spec)) {
		for (size_t i = 0; i < p->ntypes && nt < 0; i++)
			if (km_spec_empty(&p->types[i].spec))
				nt = p->types[i].index;
	} else {
		nt = md_node_type_of(p->types, p->ntypes, spec, &sim);
		if (nt >= 0 && sim < 1)
			nt = -1;
	}
	if (nt >= 0) {
		char key[16];
		snprintf(key, sizeof key, "%d", nt);
		size_t i;
		json_t *v;
		json_array_foreach(json_object_get(json_object_get(p->index, key), "members"), i,
				   v) *member |=
		    json_is_string(v) && !strcmp(json_string_value(v), host);
	}
	return nt;
}

/* Add the node type (nt -1: a new one) or the host as a member, and save the index: only when
 * it changed, not at every model. The node type, or -1 with err. */
static int node_type_add(struct md_pipeline *p, int nt, const struct km_spec *spec,
			 const char *host, char *err, size_t errlen)
{
	char key[16];
	json_t *entry;
	if (nt < 0) {
		nt = p->ntypes ? p->types[p->ntypes - 1].index + 1 : 0;
		snprintf(key, sizeof key, "%d", nt);
		entry = json_pack("{s:o, s:[]}", "attrs", km_spec_json(spec), "members");
		json_object_set_new(p->index, key, entry);
	} else {
		snprintf(key, sizeof key, "%d", nt);
		entry = json_object_get(p->index, key);
	}
	json_t *members = json_object_get(entry, "members");
	if (!json_is_array(members)) {
		members = json_array();
		json_object_set_new(entry, "members", members);
	}
	json_array_append_new(members, json_string(host));
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/node_type_index.json", p->dir);
	if (wb_json_save(p->index, path, true, err, errlen) < 0)
		return -1;
	if (index_parse(p, err, errlen) < 0)
		return -1;
	return nt;
}

/* A model message's zones as lib/kmodel.h writes them; features in feats (n_zones x
 * n_features, calloc'd, the caller frees it). NULL when out of memory. Error figures of 0 are
 * the message's "not known". */
/* An exact fit: tested on held-out slots (test_slots > 0) with no error stated above 0 (an absent
 * mae decodes as 0, so without held-out slots 0 is not known). */
static bool msg_exact(const struct wb_model *msg)
{
	if (msg->test_slots == 0 || msg->mae > 0)
		return false;
	for (size_t z = 0; z < msg->n_zones; z++)
		if (msg->zones[z].mae_w > 0)
			return false;
	return true;
}

static struct km_zone *msg_zones(const struct wb_model *msg, struct km_feat **feats)
{
	struct km_zone *zones = calloc(msg->n_zones ? msg->n_zones : 1, sizeof *zones);
	*feats = calloc(msg->n_zones * msg->n_features + 1, sizeof **feats);
	if (!zones || !*feats) {
		free(zones);
		free(*feats);
		return NULL;
	}
	for (size_t z = 0; z < msg->n_zones; z++) {
		const struct wb_model_zone *mz = &msg->zones[z];
		struct km_feat *f = *feats + z * msg->n_features;
		size_t n = 0;
		for (; n < msg->n_features && n < mz->n_weights && n < mz->n_scales; n++)
			f[n] = (struct km_feat){msg->features[n], mz->scales[n], mz->weights[n],
						n < mz->n_means ? mz->means[n] : 0};
		zones[z] =
		    (struct km_zone){.zone = mz->zone,
				     .bias_w = mz->bias_w,
				     .feat = f,
				     .nfeat = n,
				     .mae_w = mz->mae_w > 0 || msg_exact(msg) ? mz->mae_w : NAN,
				     .mape = mz->mape > 0 ? mz->mape : NAN};
	}
	return zones;
}

/*
 * What Kepler's estimator loads for a model from the bus. Its loaders read pickles
 * (scikit, curvefit) or XGBoost model files (xgboost); a linear model is an
 * XGBoost gblinear booster: weights w_i / scale_i, then the bias (means folded in,
 * as in weight.json), evaluated by XGBoost in float32. The scikit_learn attribute
 * tells XGBRegressor.load_model it is a gblinear one (in-place prediction has no
 * gblinear). metadata.json's model_file names the per-zone index, as in
 * kepler-model-db's archives.
 */
static json_t *xgboost_zone(const json_t *zone, const json_t *features)
{
	const json_t *aw = json_object_get(zone, "All_Weights");
	const json_t *num = json_object_get(aw, "Numerical_Variables");
	json_t *w = json_array();
	size_t i;
	const json_t *f;
	json_array_foreach(features, i, f)
	{
		const json_t *v = json_object_get(num, json_string_value(f));
		double scale = json_number_value(json_object_get(v, "scale"));
		double weight = json_number_value(json_object_get(v, "weight"));
		json_array_append_new(w, json_real(scale > 0 ? weight / scale : 0));
	}
	json_array_append_new(w, json_real(json_number_value(json_object_get(aw, "Bias_Weight"))));
	char nf[16];
	snprintf(nf, sizeof nf, "%zu", json_array_size(features));
	return json_pack(
	    "{s:{s:{s:s}, s:[], s:[], s:{s:{s:i, s:o}, s:s}, s:{s:s, s:s, s:s, s:s, s:s}, s:{s:s, "
	    "s:{s:s}}}, s:[i, i, i]}",
	    "learner", "attributes", "scikit_learn",
	    "{\"booster\": \"gblinear\", \"_estimator_type\": \"regressor\"}", "feature_names",
	    "feature_types", "gradient_booster", "model", "boosted_rounds", 1, "weights", w, "name",
	    "gblinear", "learner_model_param", "base_score", "0", "boost_from_average", "0",
	    "num_class", "0", "num_feature", nf, "num_target", "1", "objective", "name",
	    "reg:squarederror", "reg_loss_param", "scale_pos_weight", "1", "version", 1, 7, 4);
}

static json_t *xgboost_index(const json_t *weight, const json_t *features)
{
	json_t *idx = json_object();
	const char *zone;
	const json_t *v;
	json_object_foreach((json_t *)weight, zone, v)
	{
		char file[32];
		snprintf(file, sizeof file, "%s.json", zone);
		json_object_set_new(idx, zone,
				    json_pack("{s:s, s:O, s:[]}", "model_file", file, "features",
					      (json_t *)features, "fe_files"));
	}
	return idx;
}

/* A zone name that is a safe file name in the model's folder. */
static bool zone_name_ok(const char *zone)
{
	bool ok =
	    zone[0] && strlen(zone) < 16 && strcmp(zone, "weight") && strcmp(zone, "metadata");
	for (const char *c = zone; ok && *c; c++)
		ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
	return ok;
}

/* A zone's name is a file name in the model's folder: [a-z0-9_], not one of the other files'. */
static int zones_check(const struct wb_model *msg, char *err, size_t errlen)
{
	for (size_t z = 0; z < msg->n_zones; z++) {
		const char *zone = msg->zones[z].zone;
		bool ok = zone_name_ok(zone);
		for (size_t y = 0; ok && y < z; y++)
			ok = strcmp(msg->zones[y].zone, zone) != 0;
		if (!ok) {
			char shown[32];
			snprintf(shown, sizeof shown, "%s", zone);
			md_one_line(shown);
			snprintf(
			    err, errlen,
			    "zones[%zu].zone \"%s\": a zone is named once, in [a-z0-9_], and not weight or metadata",
			    z, shown);
			return -1;
		}
	}
	return 0;
}

/* Remove the files of a model folder this process wrote (flat), then the folder. */
static void remove_folder(const char *dir)
{
	struct dirent **ents;
	int n = scandir(dir, &ents, NULL, NULL);
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];
		if (strcmp(ents[i]->d_name, ".") && strcmp(ents[i]->d_name, "..") &&
		    join(path, sizeof path, dir, ents[i]->d_name))
			unlink(path);
		free(ents[i]);
	}
	if (n >= 0)
		free(ents);
	rmdir(dir);
}

/* A model's files as written: every zone's XGBoost model, Kepler's component file,
 * weight.json, metadata.json (last: it names the model). */
struct mfile {
	char name[48];
	json_t *j;
};
#define MFILES_MAX 67 /* 64 zones and three */

static void mfiles_free(struct mfile *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		json_decref(f[i].j);
}

/* The files of a model (its XGBoost ones made from weight.json and metadata.json's features)
 * and their size on disk (what wb_json_save writes). 0, or -1 with err. */
static int model_files(json_t *weight, json_t *meta, struct mfile *files, size_t *nf,
		       uint64_t *bytes, char *err, size_t errlen)
{
	size_t n = 0;
	const json_t *features = json_object_get(meta, "features");
	const char *zone;
	json_t *zv;
	json_object_foreach(weight, zone, zv)
	{
		if (n == 64)
			break;
		snprintf(files[n].name, sizeof files[n].name, "%s.json", zone);
		files[n++].j = xgboost_zone(zv, features);
	}
	snprintf(files[n].name, sizeof files[n].name, "%s.json", wb_json_str(meta, "model_name"));
	files[n++].j = xgboost_index(weight, features);
	snprintf(files[n].name, sizeof files[n].name, "weight.json");
	files[n++].j = json_incref(weight);
	snprintf(files[n].name, sizeof files[n].name, "metadata.json");
	files[n++].j = json_incref(meta);
	*nf = n;
	*bytes = 0;
	for (size_t i = 0; i < n; i++) {
		char *text = files[i].j ? json_dumps(files[i].j, JSON_COMPACT) : NULL;
		if (!text) {
			snprintf(err, errlen, "%s: out of memory", files[i].name);
			mfiles_free(files, n);
			return -1;
		}
		*bytes += strlen(text);
		free(text);
	}
	return 0;
}

/* Write the files into a fresh folder beside dir, then swap it in, so that a model is never
 * half written and no file of the one it replaces stays behind. */
static int write_model(const char *dir, const struct mfile *files, size_t nf, char *err,
		       size_t errlen)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	const char *slash = strrchr(dir, '/');
	if (!slash || snprintf(tmp, sizeof tmp, "%.*s/.%s.new", (int)(slash - dir), dir,
			       slash + 1) >= (int)sizeof tmp) {
		snprintf(err, errlen, "%s: path too long", dir);
		return -1;
	}
	remove_folder(tmp); /* one a crash left */
	if (wb_state_mkdir(tmp, err, errlen) < 0)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < nf && rc == 0; i++)
		if (!join(path, sizeof path, tmp, files[i].name) ||
		    wb_json_save(files[i].j, path, true, err, errlen) < 0)
			rc = -1;
	struct stat st;
	if (rc == 0) {
		bool exists = lstat(dir, &st) == 0;
		if (exists ? renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE) < 0
			   : rename(tmp, dir) < 0) {
			snprintf(err, errlen, "%s: %s", dir, strerror(errno));
			rc = -1;
		}
	}
	remove_folder(tmp); /* the replaced model, or what failed */
	return rc;
}

/*
 * A model from the bus filed before modeld wrote Kepler's estimator its XGBoost files claims
 * model_file weight.json, which the estimator cannot load: write them (from weight.json) and
 * metadata.json saying so, once, at load.
 */
static void migrate(struct md_model *m)
{
	if (!m->weight || !m->host[0] || strcmp(wb_json_str(m->meta, "model_file"), "weight.json"))
		return;
	const char *zone;
	json_t *v;
	json_object_foreach(m->weight, zone, v) if (!zone_name_ok(zone)) return;
	char file[MD_NAME_MAX + 8], err[MD_ERR_MAX];
	snprintf(file, sizeof file, "%s.json", m->name);
	json_t *meta = json_deep_copy(m->meta);
	if (!meta)
		return;
	json_object_set_new(meta, "model_class", json_string("xgboost"));
	json_object_set_new(meta, "model_file", json_string(file));
	json_object_set_new(meta, "fe_files", json_array());
	struct mfile files[MFILES_MAX];
	size_t nf;
	uint64_t bytes;
	int rc = model_files(m->weight, meta, files, &nf, &bytes, err, sizeof err);
	if (rc == 0) {
		rc = write_model(m->dir, files, nf, err, sizeof err);
		mfiles_free(files, nf);
	}
	if (rc < 0) {
		log_warnx("model store: %s: cannot write the files Kepler's estimator loads: %s",
			  m->dir, err);
		json_decref(meta);
		return;
	}
	json_decref(m->meta);
	m->meta = meta;
	m->bytes = bytes;
	log_info("model store: %s: written again with the XGBoost files Kepler's estimator loads",
		 m->dir);
}

/* The model's held-out error: its own, else its zones' added up; 0 for an exact fit, NAN when not
 * known (filed, never served). */
static double msg_mae(const struct wb_model *msg)
{
	if (msg->mae > 0)
		return msg->mae;
	if (msg_exact(msg))
		return 0;
	double sum = 0;
	bool any = false;
	for (size_t z = 0; z < msg->n_zones; z++)
		if (msg->zones[z].mae_w > 0) {
			sum += msg->zones[z].mae_w;
			any = true;
		}
	return any ? sum : NAN;
}

static double msg_mape(const struct wb_model *msg)
{
	if (msg->mape > 0)
		return msg->mape;
	double worst = -1;
	for (size_t z = 0; z < msg->n_zones; z++)
		if (msg->zones[z].mape > worst)
			worst = msg->zones[z].mape;
	return worst > 0 ? worst : -1;
}

static json_t *metadata_json(const struct wb_model *msg, const char *name, int node_type,
			     const struct km_spec *spec, double mae, const struct km_zone *zones)
{
	const char *feats[64];
	size_t nf = 0;
	for (; nf < msg->n_features && nf < 64; nf++)
		feats[nf] = msg->features[nf];
	char file[MD_NAME_MAX + 8];
	snprintf(file, sizeof file, "%s.json", name);
	struct km_meta md = {.model_name = name,
			     .trainer = WATTBUS_TRAINER,
			     .model_class = "xgboost",
			     .model_file = file,
			     .output_type = msg->type,
			     .features = feats,
			     .nfeatures = nf,
			     .mae = mae,
			     .mape = msg_mape(msg),
			     .node_type = node_type,
			     .spec = spec,
			     .host = msg->env.host,
			     .src = msg->env.src,
			     .name = msg->name,
			     .t_ns = msg->t,
			     .train_slots = msg->train_slots,
			     .test_slots = msg->test_slots};
	return km_meta_json(&md, zones, msg->n_zones);
}

/* Where key goes among the sorted models: *found when one of its name is there. */
static size_t model_pos(const struct md_store *self, const struct md_model *key, bool *found)
{
	size_t lo = 0, hi = self->nmodels;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct md_model *m = self->models[mid];
		if (cmp_models(&m, &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < self->nmodels && cmp_models(&self->models[lo], &key) == 0;
	return lo;
}

static bool trusted(const struct md_store *self, const char *host)
{
	for (size_t i = 0; i < self->pol.ntrusted; i++)
		if (!strcmp(self->pol.trusted[i], "*") || !strcmp(self->pol.trusted[i], host))
			return true;
	return false;
}

/* A refusal by the budget: err names the limit (the config key) and its value. */
static enum md_put_result over(char *err, size_t errlen, const char *key, uint64_t limit,
			       const char *what)
{
	snprintf(err, errlen, "over the budget: %s %s (%s = %llu)", what, key, key,
		 (unsigned long long)limit);
	return MD_PUT_OVER_BUDGET;
}

enum md_put_result md_store_put(struct md_store *self, const struct wb_model *msg, uint64_t now_ns,
				const struct md_model **out, char *err, size_t errlen)
{
	*out = NULL;
	if (strcmp(msg->type, "AbsPower") && strcmp(msg->type, "DynPower")) {
		snprintf(err, errlen, "type \"%s\" is neither AbsPower nor DynPower", msg->type);
		return MD_PUT_ERROR;
	}
	for (size_t z = 0; z < msg->n_zones; z++)
		if (msg->zones[z].n_weights != msg->n_features ||
		    msg->zones[z].n_scales != msg->n_features ||
		    (msg->zones[z].n_means && msg->zones[z].n_means != msg->n_features)) {
			snprintf(err, errlen, "zones[%zu] has not one weight and scale per feature",
				 z);
			return MD_PUT_ERROR;
		}
	if (zones_check(msg, err, errlen) < 0)
		return MD_PUT_ERROR;
	const struct md_policy *pol = &self->pol;
	const char *hostname = msg->env.host;
	struct md_host *h = host_get(self, hostname, now_ns);
	if (!h)
		return over(err, errlen, "max_trainers", pol->max_hosts,
			    "every trainer host tracked holds models:");
	/* the host's rate: a bucket of models_per_host_per_minute, refilled continuously */
	if (pol->models_per_host_per_min > 0) {
		double per_ns = pol->models_per_host_per_min / 60e9;
		if (now_ns > h->last_ns)
			h->tokens += (double)(now_ns - h->last_ns) * per_ns;
		if (h->tokens > pol->models_per_host_per_min)
			h->tokens = pol->models_per_host_per_min;
		h->last_ns = now_ns;
		if (h->tokens < 1) {
			snprintf(
			    err, errlen,
			    "more than %g models a minute from this host (models_per_host_per_minute)",
			    pol->models_per_host_per_min);
			return MD_PUT_RATE_LIMITED;
		}
		h->tokens -= 1;
	} else {
		h->last_ns = now_ns;
	}
	struct km_spec spec = {.cores = msg->spec.cores ? msg->spec.cores : msg->ncpu,
			       .chips = msg->spec.chips,
			       .memory_gib = msg->spec.memory_gib,
			       .frequency_mhz = msg->spec.frequency_mhz};
	wb_processor_name(msg->spec.processor, spec.processor, sizeof spec.processor);
	bool trust = trusted(self, hostname);
	struct md_pipeline *p =
	    bus_pipeline(self, trust ? self->pipeline : pol->apart, !trust, err, errlen);
	if (!p)
		return MD_PUT_ERROR;
	bool member;
	int nt = node_type_find(p, &spec, hostname, &member);
	if (nt < 0 && self->bus_types >= pol->max_node_types)
		return over(err, errlen, "max_node_types", pol->max_node_types,
			    "a new node type would pass");
	if (!member && h->types >= pol->max_node_types_per_host)
		return over(err, errlen, "max_node_types_per_host", pol->max_node_types_per_host,
			    "a node type more for this host would pass");
	const char *fp[64];
	size_t nf = 0;
	for (; nf < msg->n_features && nf < 64; nf++)
		fp[nf] = msg->features[nf];
	const struct md_group *g = md_group_of(fp, nf);
	const char *group = g ? g->name : "ThirdParty";
	char name[MD_NAME_MAX];
	/* a new node type gets the next index (node_type_add) */
	int nt_new = nt >= 0 ? nt : p->ntypes ? p->types[p->ntypes - 1].index + 1 : 0;
	snprintf(name, sizeof name, "%s_%d", WATTBUS_TRAINER, nt_new);
	double mae = msg_mae(msg);
	/* the one held under this name: replaced by the same host's newer model, or, in the
	 * trusted pipeline, by another (trusted) host's model with a lower mae */
	struct md_model key = {0};
	snprintf(key.pipeline, sizeof key.pipeline, "%s", p->name);
	snprintf(key.source, sizeof key.source, "%s", self->source);
	snprintf(key.output, sizeof key.output, "%s", msg->type);
	snprintf(key.group, sizeof key.group, "%s", group);
	snprintf(key.name, sizeof key.name, "%s", name);
	bool found;
	size_t at = model_pos(self, &key, &found);
	const struct md_model *old = found ? self->models[at] : NULL;
	enum md_put_result res = old ? MD_PUT_REPLACED : MD_PUT_NEW;
	bool same_host = old && !strcmp(old->host, hostname);
	if (old && !same_host && (p->apart || (!isnan(old->mae) && !(mae < old->mae)))) {
		*out = old;
		return MD_PUT_KEPT;
	}
	struct md_model *m = calloc(1, sizeof *m);
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return MD_PUT_ERROR;
	}
	*m = key;
	snprintf(m->origin, sizeof m->origin, "bus:%s", hostname);
	snprintf(m->host, sizeof m->host, "%s", hostname);
	struct km_feat *feats;
	struct km_zone *zones = msg_zones(msg, &feats);
	if (!zones) {
		model_free(m);
		snprintf(err, errlen, "out of memory");
		return MD_PUT_ERROR;
	}
	m->weight = km_weight_json(zones, msg->n_zones, NULL, NULL, NULL, 0, 0);
	m->meta = metadata_json(msg, name, nt_new, &spec, mae, zones);
	free(zones);
	free(feats);
	struct mfile files[MFILES_MAX];
	size_t nfiles = 0;
	char why[MD_ERR_MAX];
	if (model_files(m->weight, m->meta, files, &nfiles, &m->bytes, err, errlen) < 0) {
		nfiles = 0;
		goto fail;
	}
	/* the budget, before anything changes */
	uint64_t freed = old ? old->bytes : 0, freed_here = same_host ? freed : 0;
	enum md_put_result ob = MD_PUT_NEW;
	if (!old && self->bus_models >= pol->max_models)
		ob = over(err, errlen, "max_models", pol->max_models, "a model more would pass");
	else if (!same_host && h->models >= pol->max_models_per_host)
		ob = over(err, errlen, "max_models_per_host", pol->max_models_per_host,
			  "a model more for this host would pass");
	else if (self->bus_bytes - freed + m->bytes > pol->max_bytes)
		ob = over(err, errlen, "max_store_bytes", pol->max_bytes, "its files would pass");
	else if (h->bytes - freed_here + m->bytes > pol->max_bytes_per_host)
		ob = over(err, errlen, "max_store_bytes_per_host", pol->max_bytes_per_host,
			  "its files would pass");
	if (ob != MD_PUT_NEW) {
		mfiles_free(files, nfiles);
		model_free(m);
		return ob;
	}
	if (nt < 0 || !member) {
		bool new_type = nt < 0;
		nt = node_type_add(p, nt, &spec, hostname, err, errlen);
		if (nt < 0)
			goto fail;
		if (nt != nt_new) { /* cannot be: node_type_add numbers as above */
			snprintf(err, errlen, "node type %d, not %d as named", nt, nt_new);
			goto fail;
		}
		self->bus_types += new_type;
		h->types++;
	}
	char dir[PATH_MAX];
	const char *parts[] = {self->source, msg->type, group};
	if (mkdirs(p->dir, parts, 3, dir, sizeof dir, err, errlen) < 0)
		goto fail;
	size_t dl = strlen(dir);
	snprintf(dir + dl, sizeof dir - dl, "/%s", name);
	if (!(m->dir = strdup(dir))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	if (write_model(dir, files, nfiles, err, errlen) < 0)
		goto fail;
	mfiles_free(files, nfiles);
	nfiles = 0;
	if (model_from_meta(m, why, sizeof why) < 0) {
		snprintf(err, errlen, "%s: %s", dir, why);
		goto fail;
	}
	if (old) {
		struct md_host *oh = host_find(self, old->host);
		if (oh) {
			oh->models--;
			oh->bytes -= old->bytes;
		}
		self->bus_bytes -= old->bytes;
		model_free(self->models[at]);
		self->models[at] = m;
	} else {
		struct md_model **v = realloc(self->models, (self->nmodels + 1) * sizeof *v);
		if (!v) {
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		self->models = v;
		memmove(&v[at + 1], &v[at], (self->nmodels - at) * sizeof *v);
		v[at] = m;
		self->nmodels++;
		self->bus_models++;
	}
	h->models++;
	h->bytes += m->bytes;
	self->bus_bytes += m->bytes;
	*out = m;
	return res;
fail:
	mfiles_free(files, nfiles);
	model_free(m);
	return MD_PUT_ERROR;
}
