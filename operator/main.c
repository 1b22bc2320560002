/*
 * wattbus-operator: turns the WattBus resource into the objects of
 * deploy/kubernetes and reports their state in its status. See wattbus-operator(8).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "operator.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: wattbus-operator --render [--spec FILE] [--env FILE]\n"
	    "  --render      print the objects a WattBus resource makes (JSON documents between ---) and exit\n"
	    "  --spec FILE   the WattBus resource, as JSON (kubectl get wattbus wattbus -o json); default: the default spec\n"
	    "  --env FILE    the data of the ConfigMap spec.config names, as JSON (it is part of the config hash)\n");
}

static json_t *load(const char *path, const char *what)
{
	json_error_t je;
	json_t *j = json_load_file(path, 0, &je);
	if (!j)
		fprintf(stderr, "wattbus-operator: %s %s: line %d: %s\n", what, path, je.line,
			je.text);
	else if (!json_is_object(j)) {
		fprintf(stderr, "wattbus-operator: %s %s: not a JSON object\n", what, path);
		json_decref(j);
		j = NULL;
	}
	return j;
}

static int render(const char *spec_path, const char *env_path)
{
	json_t *wb = NULL, *env = NULL;
	if (spec_path && !(wb = load(spec_path, "--spec")))
		return 2;
	if (env_path && !(env = load(env_path, "--env"))) {
		json_decref(wb);
		return 2;
	}
	struct op_render r;
	char err[256];
	int rc = 0;
	if (op_render(wb, env, &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "wattbus-operator: %s: %s\n",
			spec_path ? spec_path : "default spec", err);
		rc = 2;
	} else {
		if (r.refused[0])
			fprintf(stderr, "wattbus-operator: %s: %s\n", r.refused_reason, r.refused);
		size_t i;
		json_t *o;
		json_array_foreach(r.objects, i, o)
		{
			char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
			printf("---\n%s\n", s);
			free(s);
		}
		op_render_clear(&r);
	}
	json_decref(wb);
	json_decref(env);
	return fflush(stdout) == 0 ? rc : 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"render", no_argument, NULL, 'R'},	   {"spec", required_argument, NULL, 'S'},
	    {"env", required_argument, NULL, 'E'}, {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},   {NULL, 0, NULL, 0}};
	const char *spec = NULL, *env = NULL;
	bool do_render = false;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'R':
			do_render = true;
			break;
		case 'S':
			spec = optarg;
			break;
		case 'E':
			env = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("wattbus-operator %s\n", WB_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "wattbus-operator: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!do_render) {
		usage(stderr);
		return 2;
	}
	return render(spec, env);
}
