/* Placeholder for an area that has no sources yet. */
typedef int pts_empty_translation_unit;
