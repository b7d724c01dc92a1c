//! The namespaces a relist of the Namespace watch brings into the cache: new ones and relabelled
//! ones, whose resources may have waited for them (see [`super::dependents`]).
//!
//! After 410 Expired, kube's watcher lists again (`Init`, `InitApply` per namespace, `InitDone`),
//! and its reflector swaps the new list into the store only at `InitDone`. Until then the store
//! holds the copies from before the relist, so each relisted namespace is compared with its
//! copy there (absent, another uid, other labels: selectors read nothing else), and the
//! namespaces that differ are told once the relist is in the store. The first list tells
//! nothing: it is awaited before any decision. kube's `predicates::labels` is not used here:
//! its cache forgets a namespace after an hour without events, which would make every quiet
//! namespace look new at each relist.

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;

use crate::controller::reflected::Reflected;

/// The state of the Namespace watch's relists.
pub(super) struct Arrivals {
    cache: Reflected<PartialObjectMeta<Namespace>>,
    /// While a relist runs (not the first list): the namespaces that differ so far.
    relist: Option<Vec<String>>,
}

impl Arrivals {
    /// Follows the watch that fills `cache`.
    pub(super) fn new(cache: Reflected<PartialObjectMeta<Namespace>>) -> Self {
        Arrivals {
            cache,
            relist: None,
        }
    }

    /// Notes `event`, once the reflector has applied it to the cache; answers the namespaces
    /// now in the cache that a relist brought new or relabelled (only at a relist's
    /// `InitDone`). A relist cut short starts again at `Init`, and is compared again.
    pub(super) fn note(&mut self, event: &Event<PartialObjectMeta<Namespace>>) -> Vec<String> {
        match event {
            Event::Init => self.relist = self.cache.is_listed().then(Vec::new),
            Event::InitApply(namespace) => {
                if let Some(relist) = &mut self.relist {
                    let before = self.cache.get(&ObjectRef::from_obj(namespace));
                    let differs = before.is_none_or(|b| {
                        b.uid() != namespace.uid() || b.labels() != namespace.labels()
                    });
                    if differs {
                        relist.push(namespace.name_any());
                    }
                }
            }
            Event::InitDone => return self.relist.take().unwrap_or_default(),
            Event::Apply(_) | Event::Delete(_) => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::reflected::reflected;

    fn namespace(name: &str, uid: &str, team: &str) -> PartialObjectMeta<Namespace> {
        let mut meta = PartialObjectMeta::<Namespace>::default();
        meta.metadata.name = Some(name.into());
        meta.metadata.uid = Some(uid.into());
        meta.metadata.labels = Some([("team".to_string(), team.to_string())].into());
        meta
    }

    /// The first list tells nothing; a relist tells, once it is in the cache, the namespaces
    /// it brought new, recreated (another uid) or relabelled, and not the unchanged ones; a
    /// relist cut short and started again tells each once.
    #[test]
    fn a_relist_tells_the_namespaces_that_differ_once_it_is_in_the_cache() {
        let (cache, mut writer) = reflected::<PartialObjectMeta<Namespace>>();
        let mut arrivals = Arrivals::new(cache.clone());
        let mut feed = |event: Event<PartialObjectMeta<Namespace>>| {
            writer.apply_watcher_event(&event);
            arrivals.note(&event)
        };
        let first = [
            Event::Init,
            Event::InitApply(namespace("quiet", "1", "a")),
            Event::InitApply(namespace("relabelled", "2", "a")),
            Event::InitApply(namespace("recreated", "3", "a")),
            Event::InitDone,
        ];
        for event in first {
            assert!(feed(event).is_empty(), "the first list tells nothing");
        }
        let relist = [
            Event::Init,
            Event::InitApply(namespace("quiet", "1", "a")),
            Event::InitApply(namespace("new", "4", "a")),
            // Cut short: the watcher lists again from the start.
            Event::Init,
            Event::InitApply(namespace("quiet", "1", "a")),
            Event::InitApply(namespace("relabelled", "2", "b")),
            Event::InitApply(namespace("recreated", "5", "a")),
            Event::InitApply(namespace("new", "4", "a")),
        ];
        for event in relist {
            assert!(feed(event).is_empty(), "nothing before the relist is in");
        }
        assert!(cache.get(&ObjectRef::new("new")).is_none());
        let told = feed(Event::InitDone);
        assert_eq!(told, ["relabelled", "recreated", "new"]);
        for name in &told {
            assert!(cache.get(&ObjectRef::new(name)).is_some(), "{name} cached");
        }
    }
}
